package gitx

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CommitAlone is the commit CommitSnapshot makes, without the status
// after it, and it reports whether git ran no program of its own on the
// way: no hook (pre-commit, prepare-commit-msg, commit-msg, post-commit,
// whichever folder or configuration they come from), no signer, no
// maintenance. A caller that staged every change just before (AddAll)
// and gets alone knows the tree the commit left without asking: HEAD is
// the commit and nothing is dirty, because only a program git ran could
// have changed the work tree between the staging and the end of the
// commit (or a process of the caller's own, which it knows of).
//
// git says what it ran in its own trace: trace2's event target
// (GIT_TRACE2_EVENT, a documented JSON-lines format), written to trace,
// an absolute path outside the work tree that CommitAlone empties first.
// Each program git starts is a "child_start" event there. alone is false
// whenever the trace does not say clearly that the commit ended well with
// no child: a git too old to trace, a trace that could not be written or
// read, a Runner that cannot set git's environment, an empty trace. The
// caller then reads the tree as before.
func (r *Repo) CommitAlone(ctx context.Context, message, trace string) (alone bool, err error) {
	er, ok := r.Runner.(EnvRunner)
	if !ok || !filepath.IsAbs(trace) {
		return false, r.commit(ctx, message)
	}
	if err := os.WriteFile(trace, nil, 0o600); err != nil {
		return false, r.commit(ctx, message)
	}
	// Nesting 1 and brief leave out what this does not read: the regions
	// inside regions, and each event's source file and line.
	env := []string{"GIT_TRACE2_EVENT=" + trace, "GIT_TRACE2_EVENT_NESTING=1", "GIT_TRACE2_EVENT_BRIEF=true"}
	_, err = er.GitEnv(ctx, r.Dir, env, strings.NewReader(message), slices.Concat(noMaintenance, []string{"commit", "-q", "-F", "-"})...)
	if err = nothingToCommit(err); err != nil {
		return false, err
	}
	data, err := os.ReadFile(trace)
	return err == nil && ranAlone(data), nil
}

// ranAlone reads a trace2 event trace: true when the process that started
// it (the one whose session id has no parent part) exited with code 0 and
// no process started another program. A line that is not an event, or a
// trace with no exit, is not clear enough: false.
func ranAlone(trace []byte) bool {
	exited := false
	for line := range bytes.Lines(trace) {
		var ev struct {
			Event string `json:"event"`
			SID   string `json:"sid"`
			Code  *int   `json:"code"`
		}
		if err := json.Unmarshal(line, &ev); err != nil || ev.Event == "" {
			return false
		}
		switch ev.Event {
		case "child_start":
			return false
		case "exit":
			if ev.SID == "" || strings.Contains(ev.SID, "/") || ev.Code == nil || *ev.Code != 0 {
				return false
			}
			exited = true
		}
	}
	return exited
}
