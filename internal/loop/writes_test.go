package loop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
)

// A build on the success path makes no more durable writes per iteration
// than its state needs (8 today, all of state.json: one per transition,
// the one into IMPLEMENT together with the attempt, plus the agent's
// process group and the commit token). The
// records (the prompt, iter-N.json, run.json) are written atomically
// without fsync (store.WriteRecord), activity.log's summary line is an
// append, and the records written off the critical path (the prompt while
// the agent runs, run.json in the background) are all there when the run
// ends.
func TestWritesPerIterationAndRecordsWrittenLater(t *testing.T) {
	// A build of one story and one of five: the difference is four
	// iterations' writes, without the run's setup and end.
	build := func(stories int) (Report, int64, int64, int64) {
		ws, opts := newSuccessBuild(t, stories)
		w0, s0 := store.WriteCounts()
		r0 := store.RecordCounts()
		rep, err := Build(context.Background(), ws, opts)
		if err != nil || rep.StoriesDone != stories {
			t.Fatalf("outcome %s, %d done: %v", rep.Outcome, rep.StoriesDone, err)
		}
		w1, s1 := store.WriteCounts()
		return rep, w1 - w0, s1 - s0, store.RecordCounts() - r0
	}
	const stories = 5
	_, w1, s1, r1 := build(1)
	rep, w5, s5, r5 := build(stories)
	writes, syncs, records := float64(w5-w1)/(stories-1), float64(s5-s1)/(stories-1), float64(r5-r1)/(stories-1)
	t.Logf("%.1f durable atomic writes, %.1f fsyncs and %.1f records per iteration", writes, syncs, records)
	if writes > 8 {
		t.Errorf("%.1f durable atomic writes per iteration, want at most 8", writes)
	}
	if records < 3 {
		t.Errorf("%.1f records per iteration written without fsync, want the prompt, iter-N.json and run.json (3)", records)
	}
	var rr RunRecord
	if _, err := store.ReadJSON(filepath.Join(rep.RunDir, "run.json"), 1, &rr); err != nil || rr.Iterations != stories || rr.Outcome != OutcomeComplete {
		t.Errorf("run.json: %+v, %v; want %d iterations, complete", rr, err, stories)
	}
	// The transition into IMPLEMENT, saved with the attempt, still comes
	// before the iteration's heading in the journal, and the state's last
	// event is the journal's last transition.
	f, err := os.Open(filepath.Join(rep.RunDir, "..", "..", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e report.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Run != rep.RunID {
			continue
		}
		switch {
		case e.Kind == report.KindTransition && e.To == string(StateImplement):
			order = append(order, "→IMPLEMENT")
		case e.Kind == report.KindIteration && e.Text != "":
			order = append(order, "heading")
		}
	}
	if want := strings.Repeat("→IMPLEMENT heading ", stories); strings.Join(order, " ")+" " != want {
		t.Errorf("journal order %v, want each transition into IMPLEMENT before its iteration's heading", order)
	}
	for n := 1; n <= stories; n++ {
		b, err := os.ReadFile(filepath.Join(rep.RunDir, fmt.Sprintf("iter-%d.prompt.md", n)))
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("US-%03d", n)) {
			t.Errorf("iter-%d.prompt.md: %v, does not name US-%03d:\n%.300s", n, err, n, b)
		}
	}
}
