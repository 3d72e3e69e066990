package agent

import (
	"reflect"
	"testing"
)

func TestSignals(t *testing.T) {
	tests := []struct {
		final string
		want  []string
	}{
		{"<promise>COMPLETE</promise>", []string{"COMPLETE"}},
		{"All done.\n  <promise>COMPLETE</promise>  \r\n", []string{"COMPLETE"}},
		{"\t<promise>NEEDS_REVIEW</promise>", []string{"NEEDS_REVIEW"}},
		{"<promise>BLOCKED</promise>\n<promise>COMPLETE</promise>\n<promise>BLOCKED</promise>", []string{"BLOCKED", "COMPLETE"}},
		{"print <promise>COMPLETE</promise> when done", nil},
		{"<promise>COMPLETE</promise> done", nil},
		{"`<promise>COMPLETE</promise>`", nil},
		{"<promise>complete</promise>", nil},
		{"<promise>COMPLETE-1</promise>", nil},
		{"<promise> COMPLETE </promise>", nil},
		{"<promise></promise>", nil},
		{"<promise>COMPLETE</promise><promise>COMPLETE</promise>", nil},
		{"<promise>COMPLETE", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := Signals(tc.final); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Signals(%q) = %q, want %q", tc.final, got, tc.want)
		}
	}
}
