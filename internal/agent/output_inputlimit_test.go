package agent

import (
	"bytes"
	"runtime"
	"testing"
)

// hostileLines are the deepest lines an agent's stream can hand a parser:
// run.go cuts every line at MaxLineBytes, and encoding/json stops at 10,000
// levels, so these are refused after a few kilobytes of work instead of
// costing memory that grows with their depth.
var hostileLines = map[string][]byte{
	"arrays":                 bytes.Repeat([]byte("["), MaxLineBytes),
	"objects":                bytes.Repeat([]byte(`{"a":`), MaxLineBytes/5),
	"tool input as a string": append([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":"`), append(bytes.Repeat([]byte(`{\"a\":`), MaxLineBytes/8), `"}]}}`...)...),
}

// A maximal nested line in any JSON stream shows nothing, changes nothing
// the run reports, and costs little memory.
func TestNestedStreamLinesAreBounded(t *testing.T) {
	for _, f := range []Format{FormatClaude, FormatCodex, FormatOpencode, FormatGemini, FormatDroid, FormatCursor} {
		for name, line := range hostileLines {
			p := NewParser(f, "")
			before := p.Result()
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			shown := p.Line(line)
			runtime.ReadMemStats(&m1)
			if len(shown) > 200 {
				t.Errorf("%s/%s: showed %d bytes of the line", f, name, len(shown))
			}
			if got := p.Result(); got.FinalMessage != before.FinalMessage {
				t.Errorf("%s/%s: the line became the final message", f, name)
			}
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 32<<20 {
				t.Errorf("%s/%s: allocated %d MB for one line", f, name, alloc>>20)
			}
		}
	}
}

func BenchmarkNestedStreamLine(b *testing.B) {
	line := hostileLines["arrays"]
	p := NewParser(FormatClaude, "")
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		p.Line(line)
	}
}
