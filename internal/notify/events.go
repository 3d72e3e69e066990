package notify

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/thread"
)

// Notification is one thing a person is told: the payload of every
// channel, before it is put in the channel's format.
type Notification struct {
	Event   string
	Time    time.Time
	Run     string
	Machine string
	Worker  string
	Task    string
	Summary string // one line a person reads
	Outcome string // run_finished only
	Reason  string
	Seq     int64 // the journal seq of the event it comes from
	Details map[string]any
	Test    bool // a sample sent by ralph notify test

	// key is what makes two notifications the same one: a channel sends
	// a key once (a repaired journal line, or a question told both by
	// its event and by the session's transition).
	key string
}

// The outcomes of run_finished.
const (
	OutcomeDone        = "done"
	OutcomeBlocked     = "blocked"
	OutcomeLimit       = "limit"
	OutcomeBudget      = "budget"
	OutcomeError       = "error"
	OutcomeInterrupted = "interrupted"
	// OutcomeChecksFailing: every task is done but a check still fails
	// on the result (exit 5): never told as done.
	OutcomeChecksFailing = "checks_failing"
)

// Machine names as the runners stamp them: notifications are a sink
// above the machines, and take their names, triggers and outcomes from
// them (a copy kept here by hand missed the checks_failing outcome).
const (
	machineLoop    = loop.MachineName
	machineSession = session.MachineName
	machineThread  = thread.MachineName
	machineEngine  = engine.MachineName
)

// deriver turns journal events into notifications, reading the facts in
// each event's data, never its text (which is worded for people and may
// change). Most come from one event; a loop's usage-limit wait ends with
// its own event, a session's when the same run and worker does something
// again.
type deriver struct {
	ending  map[string]report.Ending  // run -> the loop's last "■" limit event: why it ends
	summary map[string]report.Summary // run -> the loop's summary, which precedes its EXIT
	waits   map[string]openWait       // run+worker -> the usage-limit wait going on
}

type openWait struct {
	seq   int64
	start time.Time
}

func newDeriver() *deriver {
	return &deriver{ending: map[string]report.Ending{}, summary: map[string]report.Summary{}, waits: map[string]openWait{}}
}

// loopEnds maps the triggers that end a loop run to outcomes.
var loopEnds = map[string]string{
	string(loop.TrigAllComplete):     OutcomeDone,
	string(loop.TrigNoneSelectable):  OutcomeBlocked,
	string(loop.TrigIterationLimit):  OutcomeLimit,
	string(loop.TrigBudgetExhausted): OutcomeBudget, // also the iteration limit at STORY_SELECT: the "■" event's data tells
	string(loop.TrigAllLimited):      OutcomeLimit,
	string(loop.TrigInterrupted):     OutcomeInterrupted,
	string(loop.TrigAgentCannotRun):  OutcomeError,
	string(loop.TrigHistoryChanged):  OutcomeError,
	string(loop.TrigError):           OutcomeError,
	string(loop.TrigProgressMissing): OutcomeError,
}

// loopOutcomes maps the outcome a loop's "■" limit event or summary
// carries in its data (loop.Outcome) to run_finished's.
var loopOutcomes = map[string]string{
	string(loop.OutcomeComplete):      OutcomeDone,
	string(loop.OutcomeNeedsHuman):    OutcomeBlocked,
	string(loop.OutcomeMaxIterations): OutcomeLimit,
	string(loop.OutcomeBudget):        OutcomeBudget,
	string(loop.OutcomeInterrupted):   OutcomeInterrupted,
	string(loop.OutcomeError):         OutcomeError,
	string(loop.OutcomeChecksFailing): OutcomeChecksFailing,
}

// sessionStops maps the triggers that stop a session run to outcomes.
var sessionStops = map[string]string{
	string(session.Interrupted):     OutcomeInterrupted,
	string(session.UsageLimit):      OutcomeLimit,
	string(session.BudgetExhausted): OutcomeBudget,
}

// threadCheckpoints are the thread phases that wait for a person.
var threadCheckpoints = map[string]string{
	string(thread.PhasePendingReview): "waits for a person's review (ralph thread approve)",
	string(thread.PhaseReadyToCommit): "is ready to commit and waits for a person (ralph thread commit)",
	string(thread.PhaseStuck):         "is stuck and needs a person (ralph thread diagnose)",
}

// activity is what a run does once a usage-limit wait is over.
var activity = []report.Kind{report.KindAgentOutput, report.KindIteration, report.KindTransition,
	report.KindCheck, report.KindVerdict, report.KindCommit, report.KindHeartbeat}

func (d *deriver) derive(ev report.Event) []Notification {
	var out []Notification
	wk := ev.Run + "\x00" + ev.Worker
	n := func(event, summary string) Notification {
		return Notification{Event: event, Time: ev.Time, Run: ev.Run, Machine: ev.Machine, Worker: ev.Worker,
			Task: ev.Task, Summary: summary, Seq: ev.Seq}
	}
	finished := func(outcome, reason string, details map[string]any) {
		x := n(EventRunFinished, "")
		x.Task, x.Outcome, x.Reason, x.Details = "", outcome, oneLine(reason), details
		x.Summary = fmt.Sprintf("run %s finished: %s", ev.Run, outcome)
		if x.Reason != "" {
			x.Summary += " (" + x.Reason + ")"
		}
		x.key = ev.Run + "|" + x.Event + "|" + outcome
		out = append(out, x)
		for k := range d.waits {
			if strings.HasPrefix(k, ev.Run+"\x00") {
				delete(d.waits, k)
			}
		}
		delete(d.ending, ev.Run)
		delete(d.summary, ev.Run)
	}
	blocked := func(reason string) {
		x := n(EventTaskBlocked, fmt.Sprintf("task %s is blocked", ev.Task))
		x.Reason = oneLine(reason)
		if x.Reason != "" {
			x.Summary += ": " + x.Reason
		}
		// Once per task and run: a worker's loop and the engine both
		// tell of the same parallel task.
		x.key = ev.Run + "|" + x.Event + "|" + ev.Task
		out = append(out, x)
	}
	waiting := func(summary, reason, key string, details map[string]any) {
		x := n(EventWaitingForPerson, summary)
		x.Reason, x.Details, x.key = oneLine(reason), details, ev.Run+"|"+EventWaitingForPerson+"|"+key
		out = append(out, x)
	}
	limitWait := func(details map[string]any, until string) {
		if _, open := d.waits[wk]; open {
			return
		}
		d.waits[wk] = openWait{seq: ev.Seq, start: ev.Time}
		x := n(EventLimitWaitStarted, "every agent is at a usage limit: the run waits for a reset")
		if until != "" {
			x.Summary += " (until " + until + ")"
		}
		x.Details, x.key = details, fmt.Sprintf("%s|%s|%s|%d", ev.Run, x.Event, ev.Worker, ev.Seq)
		out = append(out, x)
	}

	tr, _ := ev.Data.(report.Transition)
	sum, _ := ev.Data.(report.Summary)
	lim, _ := ev.Data.(report.Limit)
	wt, _ := ev.Data.(report.Wait)
	bl, _ := ev.Data.(report.Blocker)
	// A run that ends first: its waits end with it, told by run_finished.
	switch {
	case ev.Machine == machineLoop && ev.Worker == "" && ev.Kind == report.KindSummary:
		d.summary[ev.Run] = sum
	case ev.Machine == machineLoop && ev.Worker == "" && lim.Ending != nil && lim.Outcome != "":
		d.ending[ev.Run] = *lim.Ending
	case ev.Machine == machineLoop && ev.Worker == "" && ev.Kind == report.KindTransition &&
		(ev.To == string(loop.StateExit) || ev.To == string(loop.StateError) || ev.To == string(loop.StateStopped)) && ev.Trigger != string(loop.TrigResumed):
		outcome, ok := loopEnds[ev.Trigger]
		if !ok {
			outcome = OutcomeError
		}
		reason := tr.Detail
		// The run said why it ends just before the transition: the "■"
		// limit event (a limit or an interrupt), else the summary (EXIT
		// from STORY_SELECT). Their outcome is exact where the trigger is
		// not: STORY_SELECT ends at the iteration limit with
		// budget_exhausted.
		said, ok := d.ending[ev.Run]
		if s := d.summary[ev.Run]; !ok && ev.To == string(loop.StateExit) && s.Build != nil {
			said = report.Ending{Outcome: s.Outcome, Reason: s.Reason}
		}
		if o := loopOutcomes[said.Outcome]; o != "" {
			outcome = o
		}
		reason = text.OrNone(said.Reason, text.OrNone(reason, defaultReason(ev.Trigger)))
		finished(outcome, reason, summaryDetails(d.summary[ev.Run]))
		return out
	case ev.Machine == machineSession && ev.Kind == report.KindTransition && ev.Trigger != string(session.Resumed):
		switch session.State(ev.To) {
		case session.Complete:
			finished(OutcomeDone, "the goal check passed", nil)
			return out
		case session.Failed:
			finished(OutcomeError, tr.Detail, nil)
			return out
		case session.Stopped:
			if ev.Trigger == string(session.WaitingForAnswers) {
				ids := splitIDs(tr.Detail)
				waiting(questionSummary(ev.Run, ids), "", strings.Join(ids, ","), map[string]any{"questions": ids})
				delete(d.waits, wk)
				return out
			}
			outcome, ok := sessionStops[ev.Trigger]
			if !ok {
				outcome = OutcomeError
			}
			finished(outcome, text.OrNone(tr.Detail, ev.Trigger), nil)
			return out
		}
	case ev.Machine == machineEngine && ev.Kind == report.KindSummary:
		outcome, ok := loopOutcomes[sum.Outcome] // a parallel build ends with the loop's outcomes
		if !ok {
			outcome = OutcomeError
		}
		reason := strings.TrimSpace(strings.TrimPrefix(ev.Text, "ralph: "))
		details := map[string]any{}
		if l := sum.Landings; l != nil {
			details["landed"], details["needs_review"], details["left"] = l.Landed, l.NeedsReview, l.Left
		}
		addCounts(details, sum)
		finished(outcome, reason, details)
		return out
	}

	// A loop's usage-limit wait ends with its own event, which says how
	// long it was; a session's when the run does something again.
	loopWaitEnded := ev.Machine == machineLoop && wt.Wait == "limit" && wt.State == "ended"
	if w, open := d.waits[wk]; open && (loopWaitEnded || slices.Contains(activity, ev.Kind)) {
		delete(d.waits, wk)
		x := n(EventLimitWaitEnded, "the usage-limit wait is over: the run goes on")
		x.Task = ""
		waited, known := time.Duration(-1), false
		if loopWaitEnded && wt.WaitedMS != nil {
			waited, known = time.Duration(*wt.WaitedMS)*time.Millisecond, true
		} else if !w.start.IsZero() && !ev.Time.IsZero() {
			waited, known = ev.Time.Sub(w.start), true
		}
		if known {
			waited = waited.Round(time.Second)
			x.Summary = fmt.Sprintf("the usage-limit wait is over after %s: the run goes on", waited)
			x.Details = map[string]any{"waited_seconds": waited.Seconds(), "started_seq": w.seq}
		}
		x.key = fmt.Sprintf("%s|%s|%s|%d", ev.Run, x.Event, ev.Worker, w.seq)
		out = append(out, x)
	}

	switch {
	case ev.Kind == report.KindTransition && ev.Machine == machineLoop && ev.To == string(loop.StateBlocker) && ev.Trigger != string(loop.TrigResumed):
		blocked(tr.Detail)
	case ev.Kind == report.KindTransition && ev.Machine == machineThread && threadCheckpoints[ev.To] != "" && ev.Trigger != string(loop.TrigResumed):
		id := text.OrNone(tr.Thread, ev.Run)
		waiting(fmt.Sprintf("thread %s %s", id, threadCheckpoints[ev.To]), tr.Reason,
			fmt.Sprintf("%s|%d", ev.To, ev.Seq), map[string]any{"thread": id, "phase": ev.To})
	case ev.Machine == machineSession && wt.Questions != nil:
		ids := slices.Sorted(slices.Values(wt.Questions))
		waiting(questionSummary(ev.Run, ids), "", strings.Join(ids, ","), map[string]any{"questions": ids})
	case ev.Machine == machineLoop && wt.Breaker == "open":
		x := n(EventBreakerOpened, "the circuit breaker opened: the run pauses before trying again")
		x.Reason = oneLine(wt.Reason)
		if x.Reason != "" {
			x.Summary = "the circuit breaker opened (" + x.Reason + "): the run pauses before trying again"
		}
		x.key = fmt.Sprintf("%s|%s|%d", ev.Run, x.Event, ev.Seq)
		out = append(out, x)
	case ev.Machine == machineLoop && wt.Wait == "limit" && wt.State == "started":
		until := ""
		details := map[string]any{"agent": orNil(wt.Agent), "resets_at": wt.Until}
		if t, err := time.Parse(time.RFC3339, wt.Until); err == nil {
			until = t.UTC().Format("15:04 UTC")
		}
		limitWait(details, until)
	case ev.Machine == machineSession && lim.WaitSeconds != 0:
		until := ""
		if t := lim.ResetsAt; t != nil && !t.IsZero() {
			until = t.UTC().Format("15:04 UTC")
		}
		limitWait(map[string]any{"agent": lim.Agent, "role": lim.Role, "resets_at": orNil(lim.ResetsAt)}, until)
	case ev.Kind == report.KindBlocker && ev.Machine == machineEngine && ev.Task != "":
		switch bl.State {
		case "needs_review":
			x := n(EventTaskNeedsReview, fmt.Sprintf("task %s needs review before it can land", ev.Task))
			x.Reason = oneLine(bl.Reason)
			if x.Reason != "" {
				x.Summary += ": " + x.Reason
			}
			x.Details = map[string]any{"branch": bl.Branch, "conflicts": orNil(bl.Conflicts)}
			x.key = ev.Run + "|" + x.Event + "|" + ev.Task
			out = append(out, x)
		case "sent_back":
			// Sent back to a worker: the queue deals with it.
		default:
			blocked(text.OrNone(bl.Reason, bl.Error))
		}
	}
	return out
}

func defaultReason(trigger string) string {
	switch trigger {
	case "all_complete":
		return "all stories complete"
	case "none_selectable":
		return "only blocked stories are left: a person must decide"
	case "interrupted":
		return "interrupted; ralph build resumes it"
	case "all_agents_limited":
		return "every agent is at its usage limit; resume later"
	case "agent_cannot_run":
		return "the agent cannot run; fix it, then ralph build"
	case "history_changed":
		return "git history changed under the run"
	}
	return trigger
}

// summaryDetails are the counts of a loop's summary for run_finished;
// nil without one.
func summaryDetails(s report.Summary) map[string]any {
	if s.Build == nil {
		return nil
	}
	out := map[string]any{"stories_completed": s.StoriesCompleted, "stories_total": s.StoriesTotal, "final_commit": s.FinalCommit}
	addCounts(out, s)
	return out
}

// addCounts adds the iterations and blocked tasks a summary counts.
func addCounts(details map[string]any, s report.Summary) {
	details["iterations"], details["blocked"] = orNil(s.Iterations), orNil(s.Blocked)
}

// orNil is what p points to, nil for no pointer: a detail that keeps its
// key when the event had none.
func orNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func questionSummary(session string, ids []string) string {
	if len(ids) == 0 {
		return fmt.Sprintf("session %s waits for a person to answer its questions (ralph questions)", session)
	}
	return fmt.Sprintf("session %s waits for a person to answer %s: ralph answer %s \"...\", then ralph run --resume", session, strings.Join(ids, ", "), ids[0])
}

func splitIDs(s string) []string {
	var ids []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			ids = append(ids, f)
		}
	}
	sort.Strings(ids)
	return ids
}

func oneLine(s string) string { return text.Clip(text.OneLine(strings.TrimSpace(s)), 300) }
