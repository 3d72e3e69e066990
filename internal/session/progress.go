package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
)

// TaskRecord is what ralph owns about one task of tasks.md: its mark and
// its counters. The title and criteria live in tasks.md.
type TaskRecord struct {
	ID   string
	Mark tasks.Mark
	// Failures counts failed attempts (Failed verdicts, blocked or invalid
	// executor runs); the next attempt is Failures+1.
	Failures int
	// Reworks counts Failed verdicts only (the seed's rework counter).
	Reworks int
	// Commit is ralph's commit of the task once Qualified.
	Commit string
}

// Progress is progress.md: the session's state and counters, written by
// ralph at every transition and read back on resume. It is markdown so a
// person can read it; ralph parses only the lines it writes.
type Progress struct {
	Title string
	State OrchestratorState
	// Baseline is HEAD when the session began; the goal check looks at
	// everything since.
	Baseline string
	// TaskBase is HEAD when the current task's attempt began; the reviewer
	// sees the diff from it.
	TaskBase string
	// CommitToken is written just before ralph commits a qualified task
	// and goes into the commit as its Ralph-Commit trailer: a commit
	// without it is the agent's, whatever other trailers it copied.
	CommitToken string
	Tasks       []TaskRecord
	UpdatedAt   time.Time
	// Tokens, CostUSD and RunMillis are what the session has spent so
	// far, across resumes: the tokens and the cost estimate the agent CLIs
	// reported, and the wall time of the ralph runs. [budget] bounds them.
	Tokens    int64
	CostUSD   float64
	RunMillis int64
	// LastEvent is the transition this progress was written for (the
	// write-ahead copy of the log's line).
	LastEvent *runkit.TransitionEvent
}

// clone is a copy of p that shares no slice with it.
func (p Progress) clone() Progress {
	p.Tasks = slices.Clone(p.Tasks)
	p.State.Blockers = slices.Clone(p.State.Blockers)
	return p
}

// Task returns the record of id, or nil.
func (p *Progress) Task(id string) *TaskRecord {
	for i := range p.Tasks {
		if p.Tasks[i].ID == id {
			return &p.Tasks[i]
		}
	}
	return nil
}

// Counts returns how many tasks there are and how many are done.
func (p *Progress) Counts() (total, done int) {
	for _, t := range p.Tasks {
		total++
		if t.Mark == tasks.MarkDone {
			done++
		}
	}
	return total, done
}

// HasUncompleted reports whether a task is not yet [x].
func (p *Progress) HasUncompleted() bool {
	total, done := p.Counts()
	return done < total
}

const progressNote = "<!-- Written by ralph at every transition and read back to resume. Do not edit. -->"

// Render writes progress.md.
func (p Progress) Render() []byte {
	var b bytes.Buffer
	s := p.State
	fmt.Fprintf(&b, "# Progress: %s\n\n%s\n\n", text.OneLine(p.Title), progressNote)
	field := func(k, v string) { fmt.Fprintf(&b, "- %s: %s\n", k, v) }
	field("Session", s.SessionID)
	field("State", string(s.Current))
	field("Stopped in", orDash(string(s.StoppedIn)))
	field("Current task", orDash(s.CurrentTaskID))
	field("Attempt", strconv.Itoa(s.CurrentAttemptNumber))
	field("Planner mode", orDash(s.PlannerMode))
	field("Pending Q&A", yesNo(s.PendingQA))
	field("Q&A cycles", strconv.Itoa(s.QACycleCount))
	field("Planning retries", strconv.Itoa(s.PlanningRetries))
	field("Failed goal checks", strconv.Itoa(s.GoalChecks))
	field("Done", yesNo(s.Done))
	field("Baseline", orDash(p.Baseline))
	field("Task base", orDash(p.TaskBase))
	field("Commit token", orDash(p.CommitToken))
	field("Reason", orDash(text.OneLine(s.Reason)))
	field("Tokens", strconv.FormatInt(p.Tokens, 10))
	field("Cost USD", strconv.FormatFloat(p.CostUSD, 'f', 4, 64))
	field("Run ms", strconv.FormatInt(p.RunMillis, 10))
	field("Updated", p.UpdatedAt.UTC().Format(time.RFC3339))
	if p.LastEvent != nil {
		if b, err := json.Marshal(p.LastEvent); err == nil {
			field("Last transition", string(b))
		}
	}
	b.WriteString("\n## Tasks\n\n| Task | Mark | Failures | Reworks | Commit |\n|---|---|---|---|---|\n")
	for _, t := range p.Tasks {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s |\n", t.ID, t.Mark, t.Failures, t.Reworks, orDash(t.Commit))
	}
	b.WriteString("\n## Blockers\n\n")
	if len(s.Blockers) == 0 {
		b.WriteString("- (none)\n")
	}
	for _, bl := range s.Blockers {
		fmt.Fprintf(&b, "- %s\n", text.OneLine(bl))
	}
	return b.Bytes()
}

// ParseProgress reads what Render wrote. Missing fields keep their zero
// values; a malformed counter or task row is an error naming the line.
func ParseProgress(path string, data []byte) (Progress, error) {
	var p Progress
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s; the file is written by ralph: restore it from the session's transitions or start a new session", path, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(text, "# Progress: "):
			p.Title = strings.TrimPrefix(text, "# Progress: ")
			continue
		case strings.HasPrefix(text, "## "):
			section = strings.TrimPrefix(text, "## ")
			continue
		}
		switch section {
		case "":
			k, v, ok := strings.Cut(strings.TrimPrefix(text, "- "), ": ")
			if !ok || !strings.HasPrefix(text, "- ") {
				continue
			}
			if v == "-" {
				v = ""
			}
			num := func() (int, error) {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return 0, bad("%s is %q, not a count", k, v)
				}
				return n, nil
			}
			var err error
			s := &p.State
			switch k {
			case "Session":
				s.SessionID = v
			case "State":
				s.Current = State(v)
				if !validState(s.Current) {
					return p, bad("unknown state %q", v)
				}
			case "Stopped in":
				s.StoppedIn = State(v)
			case "Current task":
				s.CurrentTaskID = v
			case "Attempt":
				s.CurrentAttemptNumber, err = num()
			case "Planner mode":
				s.PlannerMode = v
			case "Pending Q&A":
				s.PendingQA = v == "yes"
			case "Q&A cycles":
				s.QACycleCount, err = num()
			case "Planning retries":
				s.PlanningRetries, err = num()
			case "Failed goal checks":
				s.GoalChecks, err = num()
			case "Done":
				s.Done = v == "yes"
			case "Baseline":
				p.Baseline = v
			case "Task base":
				p.TaskBase = v
			case "Commit token":
				p.CommitToken = v
			case "Reason":
				s.Reason = v
			case "Tokens", "Run ms":
				n, perr := strconv.ParseInt(v, 10, 64)
				if perr != nil || n < 0 {
					return p, bad("%s is %q, not a count", k, v)
				}
				if k == "Tokens" {
					p.Tokens = n
				} else {
					p.RunMillis = n
				}
			case "Cost USD":
				f, perr := strconv.ParseFloat(v, 64)
				if perr != nil || f < 0 {
					return p, bad("Cost USD is %q, not an amount", v)
				}
				p.CostUSD = f
			case "Last transition":
				var ev runkit.TransitionEvent
				if err := json.Unmarshal([]byte(v), &ev); err != nil {
					return p, bad("Last transition is not a transition: %v", err)
				}
				p.LastEvent = &ev
			case "Updated":
				p.UpdatedAt, _ = time.Parse(time.RFC3339, v)
			}
			if err != nil {
				return p, err
			}
		case "Tasks":
			if !strings.HasPrefix(text, "| ") || strings.HasPrefix(text, "| Task ") {
				continue
			}
			cells := strings.Split(strings.Trim(text, "|"), "|")
			if len(cells) != 5 {
				return p, bad("a task row has %d cells, want 5", len(cells))
			}
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			var t TaskRecord
			t.ID = cells[0]
			if t.ID == "" {
				return p, bad("a task row has no task id")
			}
			switch cells[1] {
			case "[ ]", "[]":
				t.Mark = tasks.MarkTodo
			case "[P]":
				t.Mark = tasks.MarkInReview
			case "[x]", "[X]":
				t.Mark = tasks.MarkDone
			default:
				return p, bad("task %s has mark %q; marks are [ ], [P] and [x]", t.ID, cells[1])
			}
			var e1, e2 error
			t.Failures, e1 = strconv.Atoi(cells[2])
			t.Reworks, e2 = strconv.Atoi(cells[3])
			if e1 != nil || e2 != nil || t.Failures < 0 || t.Reworks < 0 {
				return p, bad("task %s has a malformed counter (counts are whole numbers, never negative)", t.ID)
			}
			if cells[4] != "-" {
				t.Commit = cells[4]
			}
			p.Tasks = append(p.Tasks, t)
		case "Blockers":
			if b, ok := strings.CutPrefix(text, "- "); ok && b != "(none)" {
				p.State.Blockers = append(p.State.Blockers, b)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("%s: %w", path, err)
	}
	if p.State.SessionID == "" || p.State.Current == "" {
		return p, fmt.Errorf("%s: no session or state line; the file is written by ralph: start a new session with ralph run \"request\"", path)
	}
	if s := p.State; (s.Current == Stopped) != resumable(s.StoppedIn) {
		return p, fmt.Errorf("%s: the state is %s but the line \"Stopped in\" says %q; the file is written by ralph: restore it from the session's transitions.jsonl (its last line says where the session was) or start a new session", path, s.Current, orDash(string(s.StoppedIn)))
	}
	return p, nil
}

func validState(s State) bool {
	for _, x := range States {
		if x == s {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
