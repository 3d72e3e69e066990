package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/workspace"
)

func SessionsDir(ws *workspace.Workspace) string { return ws.Path("sessions") }

func ActiveSessionPath(ws *workspace.Workspace) string {
	return filepath.Join(SessionsDir(ws), "active")
}

// ErrNoSession says that no session was ever started here. Read commands
// answer it with an empty answer, not an error.
var ErrNoSession = errors.New("no session yet: start one with ralph run \"what to build\"")

// sessionDir finds a session: id, or the active one when id is "".
func SessionDir(ws *workspace.Workspace, id string) (string, error) {
	if id == "" {
		b, err := os.ReadFile(ActiveSessionPath(ws))
		if errors.Is(err, os.ErrNotExist) {
			return "", ErrNoSession
		}
		if err != nil {
			return "", err
		}
		id = strings.TrimSpace(string(b))
	}
	if err := store.CheckID("session id", id); err != nil || id == "active" {
		return "", errs.Usagef("invalid session id %q", id)
	}
	dir := filepath.Join(SessionsDir(ws), id)
	if _, err := os.Stat(session.ProgressPath(dir)); err != nil {
		known := listSessions(ws)
		if len(known) == 0 {
			return "", fmt.Errorf("no session %q: there are none yet; start one with ralph run \"what to build\"", id)
		}
		return "", fmt.Errorf("no session %q: known sessions are %s", id, strings.Join(known, ", "))
	}
	return dir, nil
}

func listSessions(ws *workspace.Workspace) []string {
	entries, _ := os.ReadDir(SessionsDir(ws))
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids
}

func SessionMetrics(dir string, now time.Time) (session.Metrics, error) {
	evs, err := session.ReadTransitions(session.TransitionsPath(dir))
	if err != nil {
		return session.Metrics{}, err
	}
	// The questions say how long the session waited for a person.
	qs, err := session.LoadQuestions(dir)
	if err != nil {
		return session.Metrics{}, err
	}
	m := session.ComputeMetrics(evs, qs, now)
	if m.SessionID == "" {
		m.SessionID = filepath.Base(dir)
	}
	return m, nil
}

// activeSessionStatus reads the active session, nil when there is none.
func activeSessionStatus(ws *workspace.Workspace, now time.Time) *status.Session {
	if !pathExists(ActiveSessionPath(ws)) {
		return nil
	}
	dir, err := SessionDir(ws, "")
	if err != nil {
		return nil
	}
	p, err := session.Load(dir)
	if err != nil {
		return nil
	}
	st := &status.Session{ID: p.State.SessionID, Request: session.Request(dir), State: string(p.State.Resumes()), Done: p.State.Done,
		Reason: p.State.Reason, CurrentTask: p.State.CurrentTaskID, Attempt: p.State.CurrentAttemptNumber, QACycles: p.State.QACycleCount}
	st.Tasks, st.TasksDone = p.Counts()
	qs, _ := session.LoadQuestions(dir)
	st.OpenQuestions = len(session.OpenQuestions(qs))
	st.Metrics, _ = SessionMetrics(dir, now)
	return st
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
