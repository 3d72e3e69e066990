package loop

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/store"
)

func blockedState() *LoopState {
	return &LoopState{
		SchemaVersion: StateSchemaVersion, RunID: "r1", TaskFile: "prd.md",
		Machine: Machine{State: StateImplement, Iteration: 3, TaskID: "US-002"},
		Tasks: map[string]*TaskRecord{
			"US-001/T2": {RetryCount: 3, AutoRetried: true, Blocker: &BlockerRecord{Reason: "tests fail", Type: "permanent"}},
			"US-002":    {RetryCount: 1},
		},
		Feedback: map[string]string{"US-001/T2": "tests fail", "US-002": "lint"},
		Metrics:  Metrics{StateMillis: map[State]int64{}},
		Breaker:  Breaker{State: BreakerOpen, NoProgress: 3},
	}
}

// Unblocking a story clears its blocked subtask in the state, and nothing
// else; what the caller changes (the task file) happens first, under the
// same lock, and its refusal changes nothing.
func TestHomeUnblockClearsTheBlockedTask(t *testing.T) {
	ws := newBenchWorkspace(t)
	h := HomeOf(ws)
	if err := os.MkdirAll(h.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.save(blockedState()); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("not blocked")
	if _, err := h.Unblock("US-001", func(string, *TaskRecord) error { return refused }); err != refused {
		t.Fatalf("Unblock = %v, want the caller's refusal", err)
	}
	if st, _ := h.Load(); st.Tasks["US-001/T2"].Blocker == nil {
		t.Fatal("a refused unblock changed the state")
	}
	var seen string
	tid, err := h.Unblock("US-001", func(tid string, rec *TaskRecord) error {
		if rec == nil || rec.Blocker == nil {
			t.Errorf("before got %s without its blocker", tid)
		}
		seen = tid
		return nil
	})
	if err != nil || tid != "US-001/T2" || seen != tid {
		t.Fatalf("Unblock = %q, %v (before saw %q), want the blocked subtask US-001/T2", tid, err, seen)
	}
	st, err := h.Load()
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Tasks["US-001/T2"]; r.Blocker != nil || r.RetryCount != 0 || r.AutoRetried {
		t.Errorf("US-001/T2 after unblock = %+v, want no blocker and no retries", r)
	}
	if _, ok := st.Feedback["US-001/T2"]; ok || st.Feedback["US-002"] != "lint" || st.Tasks["US-002"].RetryCount != 1 {
		t.Errorf("unblock touched other tasks or kept the feedback: %+v %+v", st.Feedback, st.Tasks["US-002"])
	}
}

// A run working from the home holds its lock and would write its state
// over any change: the change is refused, naming the run, and the state
// stays as the run wrote it.
func TestHomeRefusesChangesWhileARunHoldsTheLock(t *testing.T) {
	ws := newBenchWorkspace(t)
	h := HomeOf(ws)
	if err := os.MkdirAll(h.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.save(blockedState()); err != nil {
		t.Fatal(err)
	}
	lock, err := store.TryLock(h.LockPath(), "ralph build")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	for name, change := range map[string]func() error{
		"unblock": func() error {
			_, err := h.Unblock("US-001/T2", func(string, *TaskRecord) error { return nil })
			return err
		},
		"reset breaker": func() error { return h.ResetBreaker("ralph thread") },
		"retire run":    func() error { return h.RetireRun("ralph thread", "prd.md", "superseded") },
		"forget":        func() error { return h.ForgetStories("ralph thread", []string{"US-002"}) },
	} {
		err := change()
		if !store.IsLocked(err) || !strings.Contains(err.Error(), "ralph build") {
			t.Errorf("%s while a run holds the lock = %v, want a refusal naming the run", name, err)
		}
	}
	st, _ := h.Load()
	if st.Tasks["US-001/T2"].Blocker == nil || st.Finished || st.Breaker.State != BreakerOpen || st.Tasks["US-002"] == nil {
		t.Errorf("a refused change changed the state: %+v", st)
	}
}

// Retiring a run, resetting the breaker and forgetting stories change
// what they say, and with no state at all they create nothing.
func TestHomeRetireResetForget(t *testing.T) {
	ws := newBenchWorkspace(t)
	h := HomeOf(ws)
	if err := h.ResetBreaker("ralph thread"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a change with no state created %s (%v)", h.Dir, err)
	}
	if err := os.MkdirAll(h.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.save(blockedState()); err != nil {
		t.Fatal(err)
	}
	if err := h.RetireRun("ralph thread", "other.md", "superseded"); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.Load(); st.Finished {
		t.Fatal("a run over another task file was retired")
	}
	for _, err := range []error{
		h.RetireRun("ralph thread", "prd.md", "superseded: thread t1 starts a new run"),
		h.ResetBreaker("ralph thread"),
		h.ForgetStories("ralph thread", []string{"US-001"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, _ := h.Load()
	if !st.Finished || st.Outcome != OutcomeInterrupted || st.Reason != "superseded: thread t1 starts a new run" {
		t.Errorf("retired run = %v %q %q", st.Finished, st.Outcome, st.Reason)
	}
	if st.Breaker.State == BreakerOpen || st.Breaker.NoProgress != 0 {
		t.Errorf("breaker after reset = %+v", st.Breaker)
	}
	if st.Tasks["US-001/T2"] != nil || st.Feedback["US-001/T2"] != "" || st.Tasks["US-002"] == nil {
		t.Errorf("forgetting US-001 left %+v / %+v", st.Tasks, st.Feedback)
	}
}

// state.json has one owner: no package outside internal/loop reads or
// writes it except through Home, so that nothing edits the state behind a
// running loop's back.
func TestStateFileHasOneOwner(t *testing.T) {
	root := filepath.Join("..", "..")
	forbidden := map[string]bool{"LoadState": true, "SaveState": true, "StatePath": true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "loop" && filepath.Base(filepath.Dir(path)) == "internal") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := map[string]bool{}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/ralphloop/ralph/internal/loop" {
				name := "loop"
				if imp.Name != nil {
					name = imp.Name.Name
				}
				names[name] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] && forbidden[sel.Sel.Name] {
				t.Errorf("%s uses %s.%s: read and change the loop's state through loop.Home (Load, Unblock, RetireRun, ResetBreaker, ForgetStories)", path, x.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
