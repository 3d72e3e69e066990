package report

import (
	"encoding/json"
	"testing"
	"time"
)

// ReadHeader reads what encoding/json reads of every event ralph writes,
// whatever its data and text hold (keys, quotes and escapes included).
func FuzzReadHeader(f *testing.F) {
	f.Add("r1", "w1", "US-001", "agent_output", `"kind":"x" \" {}`, int64(7))
	f.Add("", "", "", "heartbeat", "", int64(0))
	f.Add(`r"1`, `w\1`, "t", "note", "\n", int64(-1))
	f.Fuzz(func(t *testing.T, run, worker, task, kind, text string, seq int64) {
		ev := Event{V: SchemaVersion, Seq: seq, Time: time.Date(2026, 11, 28, 9, 0, 0, 123, time.UTC), Run: run, Worker: worker, Task: task,
			Machine: "loop", Kind: Kind(kind), Text: text}
		ev.Data = Other{Of: ev.Kind, Raw: mustJSON(t, map[string]any{"run": text, "kind": text, "time": text})}
		line, err := json.Marshal(ev)
		if err != nil {
			t.Skip()
		}
		var want Header
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := ReadHeader(line)
		if !ok || got != want {
			t.Fatalf("ReadHeader(%s)\n = %+v, %v\nwant %+v", line, got, ok, want)
		}
	})
}

func TestReadHeaderRefusesWhatIsNotAnEvent(t *testing.T) {
	for _, line := range []string{"", "not json", `{"v":0,"seq":1,"time":"2026-11-28T09:00:00Z","kind":"note"}`,
		`{"v":99,"seq":1,"time":"2026-11-28T09:00:00Z","kind":"note"}`, `{"v":1,"seq":1,"time":"yesterday","kind":"note"}`} {
		if h, ok := ReadHeader([]byte(line)); ok {
			t.Errorf("ReadHeader(%q) = %+v, true", line, h)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
