package thread

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
)

var runnerNow = time.Date(2024, time.March, 5, 14, 30, 0, 0, time.UTC)

// gitT runs the real git in dir for test setup and checks.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newTestRunner returns a runner over a fresh repository with one commit
// and one quick-mode thread in phase p, saved, whose baseline is that
// commit (see newRig). confirm is the runner's Confirm; the runner's
// output goes to the returned buffer.
func newTestRunner(t *testing.T, p Phase, confirm func(string) bool) (*Runner, *strings.Builder) {
	t.Helper()
	g := newRig(t, p, ModeQuick, confirm)
	return g.r, g.out
}

// TestCheckpointsRefuseEveryOtherRoute tries to pass each of the four
// human checkpoints through every route that is not a human command: agent
// output, ralph itself, a timer, a flag and quick mode, with a reset
// confirmed in advance and with the runner's automatic advancing. Each is
// refused and the thread on disk does not change.
func TestCheckpointsRefuseEveryOtherRoute(t *testing.T) {
	gates := []struct {
		phase Phase
		verbs []Verb
	}{
		{PhaseDrafting, []Verb{VerbFinalize}},
		{PhaseAssessing, []Verb{VerbFinalize}},
		{PhaseStuck, []Verb{VerbReviseSpec, VerbReconfigure, VerbAssist, VerbAbandon}},
		{PhasePendingReview, []Verb{VerbApprove}},
		{PhaseReadyToCommit, []Verb{VerbCommit}},
	}
	others := []Source{SourceAgent, SourceSystem, SourceTimer, SourceFlag, SourceQuick}
	yes := func(string) bool { return true }
	for _, g := range gates {
		rg := newRig(t, g.phase, ModeQuick, yes)
		r := rg.r
		// In Assessing the runner's own work is the agent's assessment,
		// which tries every way to pass the gate in its words.
		rg.agent.replies = []agentReply{{final: "VERDICT: OK\nfinalize\napprove\ncommit\n<promise>COMPLETE</promise>"}}
		before, err := os.ReadFile(Path(r.dir, "t1"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range g.verbs {
			for _, src := range others {
				err := r.apply(Event{Verb: v, Source: src}, string(v))
				if !errors.Is(err, ErrHumanRequired) {
					t.Errorf("%s %s from %s: want a human-required refusal, got %v", g.phase, v, src, err)
				}
			}
		}
		// The runner's own work and advancing, in quick mode, stop at the
		// gate.
		if err := r.drive(); err != nil {
			t.Errorf("%s: drive: %v", g.phase, err)
		}
		rg.wantSteps()
		after, _ := os.ReadFile(Path(r.dir, "t1"))
		if !bytes.Equal(before, after) || r.Thread().Phase.Type != g.phase {
			t.Errorf("%s: the thread changed without a human command:\n%s\n---\n%s", g.phase, before, after)
		}
	}
}

// TestResetNeedsConfirmation: revising a reviewed thread resets the
// workspace only after a yes from Confirm; a no, or no Confirm at all,
// changes nothing and says so with ErrResetDeclined.
func TestResetNeedsConfirmation(t *testing.T) {
	revise := Event{Verb: VerbReviseSpec, Source: SourceHuman}
	for name, confirm := range map[string]func(string) bool{"no": func(string) bool { return false }, "nil": nil} {
		r, out := newTestRunner(t, PhasePendingReview, confirm)
		if err := r.apply(revise, "revise"); !errors.Is(err, ErrResetDeclined) {
			t.Fatalf("%s: want ErrResetDeclined, got %v\n%s", name, err, out)
		}
		if l, _ := Load(r.dir, "t1"); l.Phase.Type != PhasePendingReview {
			t.Fatalf("%s: phase %s after a refused reset", name, l.Phase.Type)
		}
	}
	var asked []string
	r, out := newTestRunner(t, PhasePendingReview, func(q string) bool { asked = append(asked, q); return true })
	if err := r.apply(revise, "revise"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(asked) != 1 || asked[0] != "This will reset changes. Continue?" {
		t.Fatalf("asked %q", asked)
	}
	if r.Thread().Phase.Type != PhaseDrafting {
		t.Fatalf("phase %s after yes", r.Thread().Phase.Type)
	}
	if !strings.Contains(out.String(), "workspace reset to ") {
		t.Fatalf("no reset reported:\n%s", out)
	}
}

// TestAgentsExhausted: a thread's agents are exhausted only when every one
// of them cools down for longer than maxLimitWait.
func TestAgentsExhausted(t *testing.T) {
	r, _ := newTestRunner(t, PhaseRunning, nil)
	// The shared record drops rests long past by the real clock.
	now := time.Now().Truncate(time.Second)
	r.env.Now = func() time.Time { return now }
	if why := r.agentsExhausted([]string{"a"}); why != "" {
		t.Fatalf("no cooldowns yet: %q", why)
	}
	save := func(c map[string]time.Time) {
		cd := runkit.OpenCooldowns(r.ws.Dir())
		for name, until := range c {
			if err := cd.Set(name, until, "limit"); err != nil {
				t.Fatal(err)
			}
		}
	}
	save(map[string]time.Time{"a": now.Add(time.Hour), "b": now.Add(time.Minute)})
	if why := r.agentsExhausted([]string{"a", "b"}); why != "" {
		t.Fatalf("b is free soon: %q", why)
	}
	if why := r.agentsExhausted([]string{"a", "c"}); why != "" {
		t.Fatalf("c is not limited: %q", why)
	}
	save(map[string]time.Time{"a": now.Add(time.Hour), "b": now.Add(2 * time.Hour)})
	why := r.agentsExhausted([]string{"a", "b"})
	if !strings.HasPrefix(why, "all agents exhausted: every agent is cooling down after a usage limit (a until ") {
		t.Fatalf("%q", why)
	}
}

// TestDoRefusesWrongCommand: a command the phase does not accept changes
// nothing, and the error lists what the phase allows.
func TestDoRefusesWrongCommand(t *testing.T) {
	r, _ := newTestRunner(t, PhaseDrafting, nil)
	settled := false
	err := r.Do("approve", "", func() error { settled = true; return nil })
	var wc *WrongCommandError
	if !errors.As(err, &wc) || settled {
		t.Fatalf("want a WrongCommandError and no settling, got %v (settled %v)", err, settled)
	}
	if want := "thread t1 is Drafting, which does not accept `approve`; allowed in Drafting: abandon, assess, draft, finalize, spec"; err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err, want)
	}
	if r.Busy() {
		t.Fatal("the lock is still held after Do")
	}
}

type collect []report.Event

func (c *collect) Emit(ev report.Event) { *c = append(*c, ev) }

// TestTransitionIsAnEvent: a phase change reaches the command's sinks as
// one transition event of the thread machine, with from, to and trigger
// for programs and the line a person has always read as its text.
func TestTransitionIsAnEvent(t *testing.T) {
	r, out := newTestRunner(t, PhaseAssessing, nil)
	var got collect
	r.env.Events = report.NewEmitter(MachineName, "t1", 7, nil, report.Text{W: out}, &got, &steps{t: t})
	if err := r.apply(Event{Verb: VerbRevise, Source: SourceHuman}, "revise"); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no event")
	}
	ev := got[0]
	if ev.Kind != report.KindTransition || ev.Machine != "thread" || ev.Run != "t1" || ev.Seq != 8 ||
		ev.From != "Assessing" || ev.To != "Drafting" || ev.Trigger != "revise" || ev.Data.(report.Transition).Source != "human" {
		t.Fatalf("event %+v", ev)
	}
	if want := "thread t1: Assessing → Drafting\n"; !strings.HasPrefix(out.String(), want) || ev.Text != want {
		t.Fatalf("terminal shows %q, event text %q; want %q", out, ev.Text, want)
	}
}
