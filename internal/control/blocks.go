package control

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A person's block outlives the run that took it: `ralph block ID` is
// kept as blocks/<task>.json until `ralph unblock ID` removes it, and
// every later run (one at a time, parallel or on Temporal) and `ralph
// status` read it. A run's own records of a block are not enough: a new
// run, another engine or a task file rewritten by a landing would forget
// it, and the next build would implement a story a person held back.
//
// One file per task, so that two commands on two tasks, from two
// processes, never write over each other.

func (f Folder) blocksDir() string { return filepath.Join(f.Dir, "blocks") }

func (f Folder) blockPath(task string) string {
	// A subtask's id holds a slash: escaped, it stays one file name.
	return filepath.Join(f.blocksDir(), url.PathEscape(strings.TrimSpace(task))+".json")
}

// Hold records cmd, a person's block, until Release of its task.
func (f Folder) Hold(cmd Command) error {
	if cmd.Kind != Block {
		return inputErrorf("only a block is held, not a %s", cmd.Kind)
	}
	if strings.TrimSpace(cmd.Task) == "" {
		return inputErrorf("block needs the task's id, for example US-002")
	}
	return f.write(f.blockPath(cmd.Task), cmd)
}

// Release removes the person's block of task; false when there was none.
func (f Folder) Release(task string) (bool, error) {
	err := os.Remove(f.blockPath(task))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Held returns the person's block of task, nil when there is none.
func (f Folder) Held(task string) *Command {
	return f.read(f.blockPath(task))
}

// Holds lists the persons' blocks in force, by task id.
func (f Folder) Holds() []Command {
	entries, _ := os.ReadDir(f.blocksDir())
	var cmds []Command
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if c := f.read(filepath.Join(f.blocksDir(), e.Name())); c != nil && c.Kind == Block && c.Task != "" {
			cmds = append(cmds, *c)
		}
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Task < cmds[j].Task })
	return cmds
}

// HeldReason is the reason a person's block gives: who blocked the task,
// and why when they said.
func HeldReason(c Command) string {
	r := "blocked by " + c.By
	if t := strings.TrimSpace(c.Text); t != "" {
		r += ": " + t
	}
	return r
}
