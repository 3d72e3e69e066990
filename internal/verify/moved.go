package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
)

// MovedError is a landing target moved outside ralph to a commit where a
// check fails that passed on the commit ralph left it at: every landing
// would be judged against the failure and sent back, so the run stops and
// says how to put the branch back. Both merge queues (the local engine's
// and the Temporal integration host's) return it.
type MovedError struct {
	// Target names the branch as the person knows it ("main", or the
	// run's tip branch on the exchange remote).
	Target   string
	From, To string
	Failing  []string
	// PutBack says how to put the branch back at From: commands in
	// backquotes, as the person would type them.
	PutBack string
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("%s moved outside ralph from %s (where ralph left it) to %s, and %s %s there: ralph stops rather than send every task back. "+
		"If the move was not yours, put %s back with %s; if it was, fix %s on %s; then run the build again",
		e.Target, text.ShortHash(e.From), text.ShortHash(e.To), strings.Join(quoted(e.Failing), ", "), words.Plural(len(e.Failing), "fails", "fail"),
		e.Target, e.PutBack, strings.Join(quoted(e.Failing), ", "), e.Target)
}

// NewlyFailing are the checks failing on now that did not fail on before:
// what a move of the target broke.
func NewlyFailing(before, now *Tip) []string {
	var fresh []string
	for _, name := range now.Failing() {
		if before == nil || !slices.Contains(before.Failing(), name) {
			fresh = append(fresh, name)
		}
	}
	return fresh
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
