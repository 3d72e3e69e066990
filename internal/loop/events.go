package loop

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/ralphloop/ralph/internal/report"
)

// MachineName is the envelope's machine for every event of a build or
// plan run.
const MachineName = "loop"

// startEvents opens the run's event stream: the CLI's sink and the
// journal, whose seq the run continues.
func (r *run) startEvents(journal string) {
	r.journal = &report.Journal{Path: journal}
	after, _ := report.LastSeq(journal) // an unreadable journal starts at 1; its appends will say what is wrong
	r.em = report.NewEmitter(MachineName, r.id, after, r.opts.Now, r.opts.Sink, r.journal)
}

// say emits a line a person reads, with data for programs.
func (r *run) say(kind report.Kind, text string, data report.Payload) {
	r.emit(report.Event{Kind: kind, Text: text, Data: data})
}

// emit sends ev now, or after the transitions that wait for the next
// save of the state, when some do: a line said in a state comes after
// the transition into it, in the journal as on the screen.
func (r *run) emit(ev report.Event) {
	if !r.k.Waiting() {
		r.em.Emit(ev)
		return
	}
	if ev.Time.IsZero() {
		ev.Time = r.opts.now().UTC()
	}
	r.k.Say(ev)
}

// sayf emits a line a person reads, made from format.
func (r *run) sayf(kind report.Kind, format string, args ...any) {
	r.say(kind, fmt.Sprintf(format, args...), nil)
}

// say emits a line about the task the machine is on.
func (b *builder) say(kind report.Kind, text string, data report.Payload) {
	ev := report.Event{Kind: kind, Text: text, Data: data}
	if b.st != nil && b.st.Machine.TaskID != "" {
		ev.Task, ev.Attempt = b.st.Machine.TaskID, b.st.Machine.RetryCount+1
	}
	b.emit(ev)
}

// tell emits a fact about the task the machine is on whose payload words
// its line (report.Render).
func (b *builder) tell(data report.Payload) { b.say("", "", data) }

func (b *builder) sayf(kind report.Kind, format string, args ...any) {
	b.say(kind, fmt.Sprintf(format, args...), nil)
}

// repairJournal appends the transition a kill lost between state.json and
// the journal. A state written by an older ralph holds the line in that
// release's shape, which is appended as it was; statePath is where that
// state lives.
func (b *builder) repairJournal(path, statePath string) error {
	ev := b.st.LastEvent
	if ev == nil {
		return nil
	}
	if ev.V == 0 {
		var old struct {
			LastEvent *TransitionEvent `json:"last_event"`
		}
		if raw, err := os.ReadFile(statePath); err == nil && json.Unmarshal(raw, &old) == nil {
			return RepairEvents(path, old.LastEvent)
		}
		return nil
	}
	// The transitions saved together with the last one come first, in
	// their order: a kill may have come before any of them was appended.
	for _, e := range append(slices.Clone(b.st.EarlierEvents), *ev) {
		if err := report.Repair(path, e); err != nil {
			return err
		}
	}
	b.em.Skip(ev.Seq)
	return nil
}
