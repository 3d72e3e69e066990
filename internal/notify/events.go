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
	ending  map[string]map[string]any // run -> the data of the loop's last "■" limit event: why it ends
	summary map[string]map[string]any // run -> the loop's summary data, which precedes its EXIT
	waits   map[string]openWait       // run+worker -> the usage-limit wait going on
}

type openWait struct {
	seq   int64
	start time.Time
}

func newDeriver() *deriver {
	return &deriver{ending: map[string]map[string]any{}, summary: map[string]map[string]any{}, waits: map[string]openWait{}}
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

// engineOutcomes maps a parallel build's outcome (the loop's outcomes)
// to run_finished's.
var engineOutcomes = loopOutcomes

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

	// A run that ends first: its waits end with it, told by run_finished.
	switch {
	case ev.Machine == machineLoop && ev.Worker == "" && ev.Kind == report.KindSummary:
		d.summary[ev.Run] = ev.Data
	case ev.Machine == machineLoop && ev.Worker == "" && ev.Kind == report.KindLimit && report.DataString(ev.Data, "outcome") != "":
		d.ending[ev.Run] = ev.Data
	case ev.Machine == machineLoop && ev.Worker == "" && ev.Kind == report.KindTransition &&
		(ev.To == string(loop.StateExit) || ev.To == string(loop.StateError) || ev.To == string(loop.StateStopped)) && ev.Trigger != string(loop.TrigResumed):
		outcome, ok := loopEnds[ev.Trigger]
		if !ok {
			outcome = OutcomeError
		}
		reason := report.DataString(ev.Data, "detail")
		// The run said why it ends just before the transition: the "■"
		// limit event (a limit or an interrupt), else the summary (EXIT
		// from STORY_SELECT). Their outcome is exact where the trigger is
		// not: STORY_SELECT ends at the iteration limit with
		// budget_exhausted.
		said := d.ending[ev.Run]
		if said == nil && ev.To == string(loop.StateExit) {
			said = d.summary[ev.Run]
		}
		if o := loopOutcomes[report.DataString(said, "outcome")]; o != "" {
			outcome = o
		}
		if r := report.DataString(said, "reason"); r != "" {
			reason = r
		}
		if reason == "" {
			reason = defaultReason(ev.Trigger)
		}
		finished(outcome, reason, summaryDetails(d.summary[ev.Run]))
		return out
	case ev.Machine == machineSession && ev.Kind == report.KindTransition && ev.Trigger != string(session.Resumed):
		switch session.State(ev.To) {
		case session.Complete:
			finished(OutcomeDone, "the goal check passed", nil)
			return out
		case session.Failed:
			finished(OutcomeError, report.DataString(ev.Data, "detail"), nil)
			return out
		case session.Stopped:
			if ev.Trigger == string(session.WaitingForAnswers) {
				ids := splitIDs(report.DataString(ev.Data, "detail"))
				waiting(questionSummary(ev.Run, ids), "", strings.Join(ids, ","), map[string]any{"questions": ids})
				delete(d.waits, wk)
				return out
			}
			outcome, ok := sessionStops[ev.Trigger]
			if !ok {
				outcome = OutcomeError
			}
			finished(outcome, text.OrNone(report.DataString(ev.Data, "detail"), ev.Trigger), nil)
			return out
		}
	case ev.Machine == machineEngine && ev.Kind == report.KindSummary:
		outcome, ok := engineOutcomes[report.DataString(ev.Data, "outcome")]
		if !ok {
			outcome = OutcomeError
		}
		reason := strings.TrimSpace(strings.TrimPrefix(ev.Text, "ralph: "))
		details := map[string]any{}
		for _, k := range []string{"landed", "needs_review", "blocked", "left", "iterations"} {
			if v, ok := ev.Data[k]; ok {
				details[k] = v
			}
		}
		finished(outcome, reason, details)
		return out
	}

	// A loop's usage-limit wait ends with its own event, which says how
	// long it was; a session's when the run does something again.
	loopWaitEnded := ev.Kind == report.KindWait && ev.Machine == machineLoop && report.DataString(ev.Data, "wait") == "limit" && report.DataString(ev.Data, "state") == "ended"
	if w, open := d.waits[wk]; open && (loopWaitEnded || slices.Contains(activity, ev.Kind)) {
		delete(d.waits, wk)
		x := n(EventLimitWaitEnded, "the usage-limit wait is over: the run goes on")
		x.Task = ""
		waited, known := time.Duration(-1), false
		if ms, ok := report.DataNumber(ev.Data["waited_ms"]); loopWaitEnded && ok {
			waited, known = time.Duration(ms)*time.Millisecond, true
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
		blocked(report.DataString(ev.Data, "detail"))
	case ev.Kind == report.KindTransition && ev.Machine == machineThread && threadCheckpoints[ev.To] != "" && ev.Trigger != string(loop.TrigResumed):
		id := text.OrNone(report.DataString(ev.Data, "thread"), ev.Run)
		waiting(fmt.Sprintf("thread %s %s", id, threadCheckpoints[ev.To]), report.DataString(ev.Data, "reason"),
			fmt.Sprintf("%s|%d", ev.To, ev.Seq), map[string]any{"thread": id, "phase": ev.To})
	case ev.Kind == report.KindWait && ev.Machine == machineSession && ev.Data["questions"] != nil:
		ids := anyStrings(ev.Data["questions"])
		waiting(questionSummary(ev.Run, ids), "", strings.Join(ids, ","), map[string]any{"questions": ids})
	case ev.Kind == report.KindWait && ev.Machine == machineLoop && report.DataString(ev.Data, "breaker") == "open":
		x := n(EventBreakerOpened, "the circuit breaker opened: the run pauses before trying again")
		x.Reason = oneLine(report.DataString(ev.Data, "reason"))
		if x.Reason != "" {
			x.Summary = "the circuit breaker opened (" + x.Reason + "): the run pauses before trying again"
		}
		x.key = fmt.Sprintf("%s|%s|%d", ev.Run, x.Event, ev.Seq)
		out = append(out, x)
	case ev.Kind == report.KindWait && ev.Machine == machineLoop && report.DataString(ev.Data, "wait") == "limit" && report.DataString(ev.Data, "state") == "started":
		until := ""
		details := map[string]any{"agent": ev.Data["agent"], "resets_at": ev.Data["until"]}
		if t, err := time.Parse(time.RFC3339, report.DataString(ev.Data, "until")); err == nil {
			until = t.UTC().Format("15:04 UTC")
		}
		limitWait(details, until)
	case ev.Kind == report.KindLimit && ev.Machine == machineSession && ev.Data["wait_seconds"] != nil:
		until := ""
		if t, ok := ev.Data["resets_at"].(time.Time); ok && !t.IsZero() {
			until = t.UTC().Format("15:04 UTC")
		}
		limitWait(map[string]any{"agent": ev.Data["agent"], "role": ev.Data["role"], "resets_at": ev.Data["resets_at"]}, until)
	case ev.Kind == report.KindBlocker && ev.Machine == machineEngine && ev.Task != "":
		switch report.DataString(ev.Data, "state") {
		case "needs_review":
			x := n(EventTaskNeedsReview, fmt.Sprintf("task %s needs review before it can land", ev.Task))
			x.Reason = oneLine(report.DataString(ev.Data, "reason"))
			if x.Reason != "" {
				x.Summary += ": " + x.Reason
			}
			x.Details = map[string]any{"branch": ev.Data["branch"], "conflicts": ev.Data["conflicts"]}
			x.key = ev.Run + "|" + x.Event + "|" + ev.Task
			out = append(out, x)
		case "sent_back":
			// Sent back to a worker: the queue deals with it.
		default:
			blocked(text.OrNone(report.DataString(ev.Data, "reason"), report.DataString(ev.Data, "error")))
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

func summaryDetails(data map[string]any) map[string]any {
	if data == nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range []string{"stories_completed", "stories_total", "iterations", "final_commit", "blocked"} {
		if v, ok := data[k]; ok {
			out[k] = v
		}
	}
	return out
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

// anyStrings reads a list of strings from event data, as emitted ([]string)
// or as read back from JSON ([]any).
func anyStrings(v any) []string {
	var ids []string
	switch l := v.(type) {
	case []string:
		ids = append(ids, l...)
	case []any:
		for _, x := range l {
			if s, ok := x.(string); ok {
				ids = append(ids, s)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

func oneLine(s string) string { return text.Clip(text.OneLine(strings.TrimSpace(s)), 300) }
