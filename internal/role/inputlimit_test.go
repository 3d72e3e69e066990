package role

import (
	"strings"
	"testing"
)

// A reply of unclosed braces made the search for the result take time that
// grows with the square of its length (64 KB of "{" took 3 s; a 1 MiB line
// would take minutes). Such a reply is refused at once with a message that
// can be quoted back to the agent.
func TestDeeplyNestedReplyIsRefusedAtOnce(t *testing.T) {
	for name, text := range map[string]string{
		"braces":               "Done.\n" + strings.Repeat("{", 64<<10),
		"braces behind quotes": strings.Repeat(`{"}"`, 16<<10),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseResult(Executor, text)
			want := "no JSON result found: your reply: nesting deeper than 100 levels at line "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "end your reply with the result as a JSON object") {
				t.Fatalf("err = %v, want it to start with %q and say what to do", err, want)
			}
		})
	}
}
