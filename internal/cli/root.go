// Package cli is ralph's command line: the commands, their flags, their
// human and --json output, and the one place where errors become exit
// codes.
//
// Each command has an options struct, a constructor that binds flags to it,
// and a run function that tests call directly.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// IO is where a command reads and writes. Tests give it buffers.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// InTerminal reports whether In is a terminal a person types into.
	InTerminal bool
	// OutTerminal reports whether Out is a terminal: progress lines are
	// then updated in place.
	OutTerminal bool
}

// Env is what commands take from the process environment, injectable so
// that tests never depend on the machine's.
type Env struct {
	IO      IO
	Getenv  func(string) string
	WorkDir func() (string, error)
	Now     func() time.Time
	// Executable is the path of the running ralph binary; the demo runs
	// its scripted stand-in agent through it.
	Executable func() (string, error)
}

// SystemEnv is the real process environment.
func SystemEnv() *Env {
	return &Env{
		IO:         IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, InTerminal: isTerminal(os.Stdin), OutTerminal: isTerminal(os.Stdout)},
		Getenv:     os.Getenv,
		WorkDir:    os.Getwd,
		Now:        time.Now,
		Executable: executable,
	}
}

// executable finds the running binary by the name it was started under, so
// that a copy or link of ralph runs its demo agent through that same name.
func executable() (string, error) {
	name := os.Args[0]
	if !strings.ContainsRune(name, filepath.Separator) {
		if p, err := exec.LookPath(name); err == nil {
			name = p
		} else {
			return os.Executable()
		}
	}
	return filepath.Abs(name)
}

// isTerminal reports whether f is a terminal (a tty that answers the
// terminal ioctl), not merely a character device such as /dev/null.
func isTerminal(f *os.File) bool {
	return f != nil && isatty.IsTerminal(f.Fd())
}

// Main runs ralph with the process's arguments and returns its exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, SystemEnv(), os.Args[1:])
}

// Run executes one ralph command line and returns the exit code. Errors are
// printed here, once.
func Run(ctx context.Context, env *Env, args []string) int {
	root := NewRootCmd(env)
	root.SetArgs(args)
	root.SetIn(env.IO.In)
	root.SetOut(env.IO.Out)
	root.SetErr(env.IO.Err)
	cmd, err := root.ExecuteContextC(ctx)
	// A run's last notification (run_finished) is delivered before the
	// process exits, within a bounded wait.
	flushNotifications()
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	var ee *ExitError
	if !(errors.As(err, &ee) && ee.Silent) {
		fmt.Fprintf(env.IO.Err, "ralph: %s\n", err)
		if code == ExitUsage {
			// Point at the help of the command that was run: its flags
			// and arguments are what the person got wrong.
			if cmd == nil || cmd.Name() == "help" {
				cmd = root
			}
			fmt.Fprintf(env.IO.Err, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return code
}

// NewRootCmd builds the command tree.
func NewRootCmd(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "ralph",
		Short: "Run an AI coding agent in a loop until the work is done, verified and committed",
		Long: `ralph runs an AI coding agent CLI (Codex, Claude Code, opencode, Gemini CLI,
droid, Amp, Cursor, Copilot or any command) again and again over a PRD, one
story per fresh agent process, until every story is done and verified.
Memory lives in files and git, never in the model's context. ralph, not the
agent, decides what is done: a task counts only when ralph's own checks pass
and its acceptance criteria are met; ralph then marks it and commits it.

Start with 'ralph demo' to watch a whole run with no AI CLI installed.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// A bare `ralph` prints help; anything else that is not a command
		// is a usage error rather than a guess.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q", args[0])
			}
			return cmd.Help()
		},
	}
	root.SetHelpTemplate(root.HelpTemplate() + "\n" + exitStatusHelp + "\n")
	// --version prints one line; `ralph version` prints the details.
	root.Version = readVersion().line()
	root.SetVersionTemplate("ralph {{.Version}}\n")
	root.SetHelpCommand(newHelpCmd())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: err}
	})
	root.AddCommand(
		newInitCmd(env, nil),
		newPRDCmd(env, nil),
		newPlanCmd(env, nil),
		newBuildCmd(env, nil),
		newDemoCmd(env, nil),
		newDemoAgentCmd(env),
		newSandboxNetCmd(),
		newStatusCmd(env),
		newCleanCmd(env),
		newDiagramCmd(env),
		newWatchCmd(env),
		newServeCmd(env),
		newMCPCmd(env),
		newNotifyCmd(env),
		newDoctorCmd(env),
		newThreadCmd(env),
		newWorkerCmd(env),
		newMemoryCmd(env),
		newRunCmd(env, nil),
		newQuestionsCmd(env),
		newAnswerCmd(env),
		newMetricsCmd(env),
		newVersionCmd(env),
	)
	root.AddCommand(steerCmds(env)...)
	for _, c := range root.Commands() {
		c.SetFlagErrorFunc(root.FlagErrorFunc())
	}
	addCompletions(env, root)
	return root
}

// newHelpCmd replaces cobra's help command, which prints the root's help
// and exits 0 for a topic it does not know; a typo should fail like any
// other unknown command.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help shows the help of any command: ralph help thread start.",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usageErrorf("no help for %q: there is no such command", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
