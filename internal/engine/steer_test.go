package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
)

// attach gives the rig's run a control folder of its own.
func (r *rig) attach() control.Folder {
	r.t.Helper()
	f := control.Folder{Dir: r.t.TempDir()}
	att, err := f.Attach(control.Run{Run: "build", Machine: "build", Takes: []control.Kind{control.Skip, control.Block, control.Unblock}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(att.Detach)
	r.opts.Control = att
	return f
}

func queue(t *testing.T, f control.Folder, kind control.Kind, task string) {
	t.Helper()
	c := control.New(kind, control.ByWeb, time.Now())
	c.Task = task
	if err := f.Enqueue(c); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) controlLines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Kind == report.KindControl {
			out = append(out, ev.Text)
		}
	}
	return out
}

func TestBlockedTaskIsNotStartedByTheScheduler(t *testing.T) {
	r := newRig(t, stories(3, nil))
	f := r.attach()
	queue(t, f, control.Block, "US-002")
	rep, err := r.run()
	if err != nil || rep.Landed != 2 || !slices.Equal(rep.Blocked, []string{"US-002"}) || rep.Outcome != loop.OutcomeNeedsHuman {
		t.Fatalf("Run = %+v, %v; want 2 landed and US-002 blocked", rep, err)
	}
	if slices.Contains(r.started, "US-002") {
		t.Errorf("a worker started the blocked US-002 (started: %v)", r.started)
	}
	if got := r.controlLines(); len(got) != 1 || got[0] != "  ⇢ block US-002 by web: taken\n" {
		t.Errorf("control lines = %q", got)
	}
	if reg, _, _ := LoadRegistry(r.ws.Dir()); reg.Tasks["US-002"].Reason != "blocked by web" {
		t.Errorf("US-002's reason = %q; want who blocked it", reg.Tasks["US-002"].Reason)
	}
}

func TestSkippedTaskGoesLast(t *testing.T) {
	r := newRig(t, stories(3, nil))
	r.opts.Workers = 1
	f := r.attach()
	queue(t, f, control.Skip, "US-001")
	queue(t, f, control.Block, "US-009")
	rep, err := r.run()
	if err != nil || rep.Landed != 3 {
		t.Fatalf("Run = %+v, %v; want all 3 landed, the skipped one too", rep, err)
	}
	if want := []string{"US-002", "US-003", "US-001"}; !slices.Equal(r.started, want) {
		t.Errorf("workers started %v; want %v", r.started, want)
	}
	if got := r.controlLines(); len(got) != 2 || got[1] != "  ⇢ block US-009 by web: refused: no task US-009 in PRD.md\n" {
		t.Errorf("control lines = %q; want the unknown task refused", got)
	}
}
