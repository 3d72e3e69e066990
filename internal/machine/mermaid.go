package machine

import (
	"fmt"
	"strings"
)

// Pseudo is Mermaid's start and end pseudo-state: an arrow from it enters
// the machine, an arrow to it ends it.
const Pseudo = "[*]"

// Arrow is one line of a state diagram; an empty Label draws none.
type Arrow struct {
	From, To, Label string
}

// Mermaid renders arrows, in order, as a Mermaid state diagram. Every
// `ralph diagram` goes through it, so the four machines' diagrams cannot
// differ in how they are written, only in what their tables hold.
func Mermaid(arrows []Arrow) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	for _, a := range arrows {
		fmt.Fprintf(&b, "    %s --> %s", a.From, a.To)
		if a.Label != "" {
			b.WriteString(": " + a.Label)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Joined merges the arrows between the same two states into the first of
// them, their labels joined by " / ", for a machine whose edges are many
// labels between few states.
func Joined(arrows []Arrow) []Arrow {
	type pair struct{ from, to string }
	at := map[pair]int{}
	var out []Arrow
	for _, a := range arrows {
		k := pair{a.From, a.To}
		if i, ok := at[k]; ok {
			out[i].Label += " / " + a.Label
			continue
		}
		at[k] = len(out)
		out = append(out, a)
	}
	return out
}
