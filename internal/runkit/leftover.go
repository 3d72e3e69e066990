package runkit

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/store"
)

// AgentFile records the agent run in progress of a runner that keeps no
// other state for it (a session's role, a thread's spec agent): "PGID
// TOKEN", the token written before the agent starts (PGID 0) and the group
// once it runs. A crash at any instant after the start leaves what finds
// the agent; StopLeftover on the next start stops it.
type AgentFile string

// Save records the agent's process group (0 before it starts) and token.
func (f AgentFile) Save(pgid int, token string) error {
	return store.WriteRecord(string(f), []byte(strconv.Itoa(pgid)+" "+token+"\n"), 0o644)
}

// Clear forgets the run: it ended and ralph saw it end.
func (f AgentFile) Clear() { _ = os.Remove(string(f)) }

// Read returns what Save recorded; ok is false when nothing is. A file from
// an older ralph holds the group only.
func (f AgentFile) Read() (pgid int, token string, ok bool) {
	b, err := os.ReadFile(string(f))
	if errors.Is(err, os.ErrNotExist) || err != nil {
		return 0, "", false
	}
	fs := strings.Fields(string(b))
	if len(fs) > 0 {
		pgid, _ = strconv.Atoi(fs[0])
	}
	if len(fs) > 1 {
		token = fs[1]
	}
	return pgid, token, true
}

// StopLeftover stops what an agent run left running when ralph died: every
// process carrying token, wherever it went, and the process group pgid
// when one of its members carries the token or works in root (a group
// number alone may have been reused by an unrelated program). It returns
// what it stopped; Escaped names processes that had left the group, which
// shows the agent tried to outlive its run.
func StopLeftover(token string, pgid int, root string) proc.Stopped {
	return agent.StopLeftover(token, pgid, func(p proc.Process) bool { return proc.WorksIn(p.PID, root) })
}

// StopRecorded is StopLeftover for what f recorded; the record is removed
// after. found says a run was recorded at all: it was cut short.
func (f AgentFile) StopRecorded(root string) (st proc.Stopped, found bool) {
	pgid, token, ok := f.Read()
	if !ok {
		return proc.Stopped{}, false
	}
	st = StopLeftover(token, pgid, root)
	f.Clear()
	return st, true
}
