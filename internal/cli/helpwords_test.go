package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// designWords are the names the design documents use for their parts (the
// seeds 000 to 004, the "Brooks" agent of one of them), which mean nothing
// to someone reading --help.
var designWords = regexp.MustCompile(`(?i)\bseeds?\b|\bbrooks\b`)

// TestHelpSpeaksTheUsersWords walks every command and flag and fails on a
// design document's name in what `ralph ... --help` shows.
func TestHelpSpeaksTheUsersWords(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for what, text := range map[string]string{"Short": c.Short, "Long": c.Long, "Example": c.Example} {
			if m := designWords.FindString(text); m != "" {
				t.Errorf("%s: %s says %q:\n%s", c.CommandPath(), what, m, text)
			}
		}
		check := func(f *pflag.Flag) {
			if m := designWords.FindString(f.Usage); m != "" {
				t.Errorf("%s --%s: usage says %q: %s", c.CommandPath(), f.Name, m, f.Usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := NewRootCmd(&Env{})
	root.InitDefaultHelpCmd()
	walk(root)
}

// TestFlagHelpHasNoBacktickPlaceholders fails on a flag whose usage
// quotes something in backticks: pflag takes a backticked word for the
// flag's value name, so --help showed "--engine ralph worker" instead of
// "--engine string".
func TestFlagHelpHasNoBacktickPlaceholders(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: its help shows %q as the value's name: %s", c.CommandPath(), f.Name, name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd(&Env{}))
}
