// Package control is the one way to steer a run: pause it after its
// current step, resume it, stop it as Ctrl+C would, queue a hint for the
// next prompt, skip, block or unblock a task, answer a session's question
// and take a thread's human checkpoints.
//
// The CLI, `ralph watch`, `ralph serve` and `ralph mcp` all build a
// Command and hand it to a Steerer; cli wires the one Steerer that applies
// it. A command meant for a run that is going is left in the workspace's
// control folder (.ralph/control/), where the run takes it at its next
// step boundary, from whatever process or machine gave it. Every command
// is journaled, with who gave it, when it is given and when a run takes it.
//
// This package holds the command, its files and the run's side (Attach);
// it knows nothing of the machines, so that every runner can import it.
package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SchemaVersion is the version of a command file and of Command in JSON.
const SchemaVersion = 1

// Kind names a command.
type Kind string

// The commands.
const (
	Pause      Kind = "pause"      // wait after the current step until resumed
	Resume     Kind = "resume"     // go on after a pause
	Stop       Kind = "stop"       // end the run now, as Ctrl+C would
	Hint       Kind = "hint"       // a hint for the next prompt (ralph add-context)
	Skip       Kind = "skip"       // set a task aside for now: others go first
	Block      Kind = "block"      // block a task until a person unblocks it
	Unblock    Kind = "unblock"    // clear a task's blocker
	Approve    Kind = "approve"    // accept a task's reviewed test change
	Answer     Kind = "answer"     // answer a session's question
	Checkpoint Kind = "checkpoint" // a thread's human checkpoint (finalize, approve, ...)
)

// Kinds lists every command, in the order help shows them.
var Kinds = []Kind{Pause, Resume, Stop, Hint, Skip, Block, Unblock, Approve, Answer, Checkpoint}

// Checkpoints are the thread commands a front end may give: the steps
// that always need a person (`ralph thread --help`). They are taken only
// from a person's action in a front end, never from agent output.
var Checkpoints = []string{"finalize", "approve", "request-changes", "commit", "abandon"}

// The front ends that give commands: Command.By.
const (
	ByCLI   = "cli"
	ByWatch = "watch"
	ByWeb   = "web"
	ByMCP   = "mcp"
)

// Command is one control command.
type Command struct {
	V    int       `json:"v"`
	ID   string    `json:"id"`
	Kind Kind      `json:"command"`
	By   string    `json:"by"`
	Time time.Time `json:"time"`
	// Task is the task of skip, block and unblock.
	Task string `json:"task,omitempty"`
	// Text is the hint, the reason of a block or skip, the answer, or
	// what to fix for request-changes.
	Text string `json:"text,omitempty"`
	// Session and Question name what an answer answers; an empty
	// Session means the active session.
	Session  string `json:"session,omitempty"`
	Question string `json:"question,omitempty"`
	// Thread and Step name a checkpoint; an empty Thread means the
	// active thread.
	Thread string `json:"thread,omitempty"`
	Step   string `json:"step,omitempty"`
}

// Result says what became of a command.
type Result struct {
	ID string `json:"id"`
	// Status is "applied" (done now) or "queued" (a run that is going
	// takes it at its next step boundary).
	Status string `json:"status"`
	// Message is the sentence a person reads.
	Message string `json:"message"`
}

// The statuses of a Result.
const (
	Applied = "applied"
	Queued  = "queued"
)

// Steerer applies commands. The CLI, the TUI, the web page and the MCP
// server all steer through one.
type Steerer interface {
	Do(ctx context.Context, cmd Command) (Result, error)
}

// InputError is a command that is wrong as given: nothing was changed.
// Front ends show it as the caller's mistake (exit 2, HTTP 400).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// New returns a command of kind given by by at now, with a fresh id.
func New(kind Kind, by string, now time.Time) Command {
	return Command{V: SchemaVersion, ID: NewID(now), Kind: kind, By: by, Time: now.UTC()}
}

// NewID returns an id that sorts by time: commands queued one after the
// other are taken in the order they were given.
func NewID(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(b[:])
}

// maxText bounds a hint, reason or answer: it goes into a prompt or a
// file, and a front end must not be able to grow either without end.
const maxText = 16 << 10

// Validate reports what is wrong with cmd, as an *InputError.
func (c Command) Validate() error {
	if !slices.Contains(Kinds, c.Kind) {
		names := make([]string, len(Kinds))
		for i, k := range Kinds {
			names[i] = string(k)
		}
		return inputErrorf("unknown command %q: the commands are %s", c.Kind, strings.Join(names, ", "))
	}
	// The id names the command's queue file: nothing but letters,
	// digits, dots and dashes, or a command could be written anywhere.
	if strings.ContainsFunc(c.ID, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '-')
	}) {
		return inputErrorf("the command id %q may hold only letters, digits, dots and dashes", c.ID)
	}
	if strings.TrimSpace(c.By) == "" {
		return inputErrorf("a command needs who gives it (by: cli, watch, web or mcp)")
	}
	if len(c.Text) > maxText {
		return inputErrorf("the text of a %s is %d bytes; at most %d are taken", c.Kind, len(c.Text), maxText)
	}
	for _, f := range []struct{ name, v string }{{"task", c.Task}, {"session", c.Session}, {"question", c.Question}, {"thread", c.Thread}, {"step", c.Step}} {
		if strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' && f.name != "task" }) {
			return inputErrorf("the %s %q holds characters no %s id has", f.name, f.v, f.name)
		}
	}
	text := strings.TrimSpace(c.Text)
	switch c.Kind {
	case Hint:
		if text == "" {
			return inputErrorf("a hint needs its text, for example: use the existing HTTP client")
		}
	case Skip, Block, Unblock, Approve:
		if strings.TrimSpace(c.Task) == "" {
			return inputErrorf("%s needs the task's id, for example US-002", c.Kind)
		}
	case Answer:
		if strings.TrimSpace(c.Question) == "" || text == "" {
			return inputErrorf("an answer needs the question's id and the answer's text (`ralph questions` lists the open questions)")
		}
	case Checkpoint:
		if !slices.Contains(Checkpoints, c.Step) {
			return inputErrorf("unknown thread checkpoint %q: the checkpoints are %s", c.Step, strings.Join(Checkpoints, ", "))
		}
		if c.Step == "request-changes" && text == "" {
			return inputErrorf("request-changes needs what to fix")
		}
	}
	return nil
}

// Describe is the command in a few words, for the journal and messages.
func (c Command) Describe() string {
	switch c.Kind {
	case Hint:
		return fmt.Sprintf("hint %q", clip(c.Text, 60))
	case Skip, Block, Unblock, Approve:
		if c.Text != "" {
			return fmt.Sprintf("%s %s (%s)", c.Kind, c.Task, clip(c.Text, 60))
		}
		return fmt.Sprintf("%s %s", c.Kind, c.Task)
	case Answer:
		return fmt.Sprintf("answer to %s", c.Question)
	case Checkpoint:
		if c.Thread != "" {
			return fmt.Sprintf("%s thread %s", c.Step, c.Thread)
		}
		return fmt.Sprintf("%s the active thread", c.Step)
	}
	return string(c.Kind)
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
