package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/spf13/cobra"
)

// DoctorOptions holds the flags of `ralph doctor`.
type DoctorOptions struct {
	Env   *Env
	Agent string
	JSON  bool
	All   bool
	// Diagnose checks one agent; nil means agent.Diagnose.
	Diagnose func(ctx context.Context, s agent.Spec) agent.Diagnosis
}

// DoctorReport is what `ralph doctor --json` prints.
type DoctorReport struct {
	Agents   []DoctorAgent `json:"agents"`
	Sandbox  DoctorSandbox `json:"sandbox"`
	Problems int           `json:"problems"`
}

// DoctorSandbox says whether the agents' sandbox can start here.
type DoctorSandbox struct {
	// Mode is [sandbox] mode: off, bwrap or auto.
	Mode  string `json:"mode"`
	Works bool   `json:"works"`
	// Missing is what keeps it from starting ("" when it works). It is a
	// problem only in mode bwrap, where no agent could run.
	Missing string `json:"missing,omitempty"`
}

// DoctorAgent is one checked agent and why it was checked.
type DoctorAgent struct {
	agent.Diagnosis
	// Roles say why the agent was checked: "build agent (config)",
	// "reviewer", "[agents.NAME]", "built-in".
	Roles []string `json:"roles"`
}

func newDoctorCmd(env *Env) *cobra.Command {
	opts := &DoctorOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that the configured agent CLIs are installed and still take ralph's flags",
		Long: `Check every agent ralph is set up to run: the one 'ralph build' would use
(--agent, AGENT_CMD or config), the [validate] reviewer and every
[agents.NAME] in .ralph/config.toml; with --all every built-in agent too.

For each agent doctor reports whether its program is on PATH, its version
(the first line of '<program> --version'), and whether the program's help
(for example 'codex exec --help') still lists every flag ralph passes to it.
Each probe is killed after 10s. Only the programs of the built-in agents are
run, for their --version and --help; any other command (AGENT_CMD or
[agents.NAME]) is never run, since it may start a real agent run: doctor
only checks that it exists and is executable. Doctor also says whether the
agents' sandbox ([sandbox] mode, --sandbox) can start here and what is
missing; that is a problem only in mode bwrap. Every problem gets one line;
the exit status is 0 without problems and 1 with any.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "check this agent as the build agent (see ralph build --help)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&opts.All, "all", false, "check every built-in agent too")
	return cmd
}

func runDoctor(cmd *cobra.Command, opts *DoctorOptions) error {
	env := opts.Env
	ctx := cmd.Context()
	// Outside a repository doctor still checks the agents of the default
	// configuration.
	_, a, err := openWorkspace(ctx, env)
	if err != nil && !errors.Is(err, gitx.ErrNotRepo) {
		return err
	}
	targets, err := a.UsedAgents(opts.Agent, opts.All)
	if err != nil {
		return err
	}
	diagnose := opts.Diagnose
	if diagnose == nil {
		diagnose = agent.Diagnose
	}
	rep := DoctorReport{Agents: make([]DoctorAgent, len(targets))}
	var wg sync.WaitGroup
	for i, t := range targets {
		if t.Problem != "" {
			rep.Agents[i] = DoctorAgent{Diagnosis: agent.Diagnosis{
				Name: t.Spec.Name, FlagsChecked: []string{}, FlagsMissing: []string{}, Problems: []string{t.Problem},
			}, Roles: t.Roles}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep.Agents[i] = DoctorAgent{Diagnosis: diagnose(ctx, t.Spec), Roles: t.Roles}
		}()
	}
	rep.Sandbox.Mode = string(a.SandboxMode())
	if err := sandbox.Probe(ctx); err != nil {
		rep.Sandbox.Missing = err.Error()
	} else {
		rep.Sandbox.Works = true
	}
	wg.Wait()
	if ctx.Err() != nil {
		return loop.ErrInterrupted
	}
	for _, a := range rep.Agents {
		rep.Problems += len(a.Problems)
	}
	if !rep.Sandbox.Works && rep.Sandbox.Mode == string(sandbox.Bwrap) {
		rep.Problems++
	}
	out := env.IO.Out
	if opts.JSON {
		if err := writeJSON(env, rep); err != nil {
			return err
		}
	} else {
		printDoctor(out, rep)
	}
	if rep.Problems > 0 {
		// The report above names each problem; this line is for a
		// script's log, after ralph's own "ralph: " prefix.
		return fmt.Errorf("doctor found %s", words.Count(rep.Problems, "problem", "problems"))
	}
	return nil
}

// printDoctor writes one block per agent, then the number of problems.
func printDoctor(w io.Writer, rep DoctorReport) {
	for i, a := range rep.Agents {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (%s)\n", a.Name, strings.Join(a.Roles, ", "))
		switch {
		case a.Program == "" && len(a.Problems) > 0:
			// Not resolved, or no command: the problem says it all.
		case !a.Installed:
			// The problem line names the program and how to install it:
			// one ✗ line per missing agent.
		case !a.Probed:
			fmt.Fprintf(w, "  ✓ installed: %s\n", a.Path)
			fmt.Fprintln(w, "  ✓ custom command: found and executable; not run")
		default:
			fmt.Fprintf(w, "  ✓ installed: %s\n", a.Path)
			mark := "✓"
			if a.Version == "unknown" {
				mark = "?"
			}
			fmt.Fprintf(w, "  %s version: %s\n", mark, a.Version)
			help := "`" + strings.Join(a.HelpArgv, " ") + "`"
			switch {
			case len(a.FlagsChecked) == 0:
				fmt.Fprintln(w, "  ✓ flags: none to check")
			case len(a.FlagsMissing) > 0:
				fmt.Fprintf(w, "  ✗ flags: %s missing from %s\n", strings.Join(a.FlagsMissing, ", "), help)
			case len(a.Problems) > 0:
				fmt.Fprintf(w, "  ✗ flags: not checked (%s)\n", strings.Join(a.FlagsChecked, " "))
			default:
				fmt.Fprintf(w, "  ✓ flags: %s all listed by %s\n", strings.Join(a.FlagsChecked, " "), help)
			}
		}
		for _, p := range a.Problems {
			fmt.Fprintf(w, "  ✗ %s\n", p)
		}
	}
	if len(rep.Agents) > 0 {
		fmt.Fprintln(w)
	}
	sb := rep.Sandbox
	fmt.Fprintf(w, "sandbox ([sandbox] mode %s)\n", sb.Mode)
	switch {
	case sb.Works:
		fmt.Fprintln(w, "  ✓ bwrap starts a sandbox here")
	case sb.Mode == string(sandbox.Bwrap):
		fmt.Fprintf(w, "  ✗ %s: no agent can run in mode bwrap\n", sb.Missing)
	case sb.Mode == string(sandbox.Auto):
		fmt.Fprintf(w, "  ! %s: agents run without a sandbox\n", sb.Missing)
	default:
		fmt.Fprintf(w, "  - %s\n", sb.Missing)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, words.Count(rep.Problems, "problem", "problems"))
}
