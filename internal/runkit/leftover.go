package runkit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/store"
)

// AgentFile records the agent run in progress of a runner that keeps no
// other state for it (a session's role, a thread's spec agent): "PGID
// TOKEN START", the token written before the agent starts (PGID 0) and the
// group, with its leader's start time, once it runs. A crash at any
// instant after the start leaves what finds the agent; StopLeftover on the
// next start stops it.
type AgentFile string

// Save records the agent's process group (0 before it starts) and token,
// and the start time of the group's leader, which tells the agent from a
// later program given the same number.
func (f AgentFile) Save(pgid int, token string) error {
	var start uint64
	if p, ok := proc.Lookup(pgid); pgid > 0 && ok {
		start = p.Start
	}
	if token == "" {
		token = "-"
	}
	return store.WriteRecord(string(f), []byte(fmt.Sprintf("%d %s %d\n", pgid, token, start)), 0o644)
}

// Clear forgets the run: it ended and ralph saw it end.
func (f AgentFile) Clear() { _ = os.Remove(string(f)) }

// Read returns what Save recorded; ok is false when nothing is. A file from
// an older ralph holds the group only, or the group and the token.
func (f AgentFile) Read() (pgid int, token string, start uint64, ok bool) {
	b, err := os.ReadFile(string(f))
	if errors.Is(err, os.ErrNotExist) || err != nil {
		return 0, "", 0, false
	}
	fs := strings.Fields(string(b))
	if len(fs) > 0 {
		pgid, _ = strconv.Atoi(fs[0])
	}
	if len(fs) > 1 && fs[1] != "-" {
		token = fs[1]
	}
	if len(fs) > 2 {
		start, _ = strconv.ParseUint(fs[2], 10, 64)
	}
	return pgid, token, start, true
}

// StopLeftover stops what an agent run left running when ralph died: every
// process carrying token, wherever it went, and the process group pgid
// when one of its members carries the token or is its leader started at
// start (see agent.StopLeftover). Where a process works proves nothing: a
// user's editor, shell or dev server in the repository may have been given
// the recorded number since. It returns what it stopped; Escaped names
// processes that had left the group, which shows the agent tried to
// outlive its run.
func StopLeftover(token string, pgid int, start uint64) proc.Stopped {
	return agent.StopLeftover(token, pgid, start)
}

// StopRecorded is StopLeftover for what f recorded; the record is removed
// after. found says a run was recorded at all: it was cut short.
func (f AgentFile) StopRecorded() (st proc.Stopped, found bool) {
	pgid, token, start, ok := f.Read()
	if !ok {
		return proc.Stopped{}, false
	}
	st = StopLeftover(token, pgid, start)
	f.Clear()
	return st, true
}
