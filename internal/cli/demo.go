package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// DemoOptions holds the flags of `ralph demo`.
type DemoOptions struct {
	Env *Env
	Dir string
}

func newDemoCmd(env *Env, runF func(*DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a whole plan and build run in a throwaway repository, with a scripted agent (no AI)",
		Long: `Create a throwaway git repository with a three-story PRD and run the real
plan and build loop on it against a built-in scripted stand-in agent. The
stand-in makes real edits and commits; one story fails its check once, so
you see prompts, logs, verification, a retry and commits. No AI runs and no
AI CLI is needed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runDemo(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "where to create the demo repository (must not exist; default: a new temporary folder)")
	return cmd
}

// newDemoAgentCmd is the demo's scripted stand-in agent. It is hidden and
// runs only the scenario that `ralph demo` wrote; it is not an agent anyone
// should configure.
func newDemoAgentCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:                "__demo-agent --scenario FILE",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || args[0] != "--scenario" {
				return usageErrorf("__demo-agent is ralph demo's scripted stand-in: it needs --scenario FILE")
			}
			os.Setenv(fakeagent.EnvScenario, args[1])
			if code := fakeagent.Main(args[2:], env.IO.In, env.IO.Out, env.IO.Err); code != 0 {
				return &ExitError{Code: code, Msg: fmt.Sprintf("demo agent exited %d", code), Silent: true}
			}
			return nil
		},
	}
}

const demoPRD = `# PRD: calc.sh, a tiny calculator

A command-line calculator in POSIX sh, so the demo runs anywhere.

### [ ] US-001: Add two numbers
As a user, I want ` + "`sh calc.sh add 2 3`" + ` to print 5.
- [ ] ` + "`sh calc.sh add A B`" + ` prints A+B (verify: ` + "`test \"$(sh calc.sh add 2 3)\" = 5`" + `)
- [ ] tests/add.sh covers it

### [ ] US-002: Subtract two numbers
As a user, I want ` + "`sh calc.sh sub 7 2`" + ` to print 5.
- [ ] ` + "`sh calc.sh sub A B`" + ` prints A-B (verify: ` + "`test \"$(sh calc.sh sub 7 2)\" = 5`" + `)
- [ ] tests/sub.sh covers it

### [ ] US-003: Multiply two numbers
As a user, I want ` + "`sh calc.sh mul 4 3`" + ` to print 12.
- [ ] ` + "`sh calc.sh mul A B`" + ` prints A*B (verify: ` + "`test \"$(sh calc.sh mul 4 3)\" = 12`" + `)
- [ ] tests/mul.sh covers it
`

const demoRunTests = `#!/bin/sh
# Runs every test in tests/; the demo's quality gate. It reports each test
# in TAP, so that ralph reads the tests one by one: a test that failed
# before the work and passes after it, or a new one that passes, is
# evidence; one that passed and now fails is a regression.
echo "TAP version 13"
n=0
status=0
for t in tests/*.sh; do
  [ -e "$t" ] || continue
  n=$((n + 1))
  if out=$(sh "$t" 2>&1); then
    echo "ok $n - $t"
  else
    echo "not ok $n - $t"
    echo "  ---"
    echo "  message: $out"
    echo "  ..."
    status=1
  fi
done
echo "1..$n"
exit $status
`

const demoCalc = `#!/bin/sh
# calc.sh: a tiny calculator, built one story at a time.
case "$1" in
  add) echo $(($2 + $3)) ;;
  *) echo "unknown operation: $1" >&2; exit 2 ;;
esac
`

func demoTest(op, a, b, want string) string {
	return fmt.Sprintf("got=$(sh calc.sh %s %s %s)\n[ \"$got\" = %s ] || { echo \"calc.sh %s %s %s: want %s, got $got\"; exit 1; }\n", op, a, b, want, op, a, b, want)
}

func demoProgress(id, what string) string {
	return fmt.Sprintf("\n## %s (demo agent)\n- %s\n- Learned: keep each operation a single case line in calc.sh.\n---\n", id, what)
}

// demoScenario scripts the stand-in agent. Its first attempt at US-002 has
// a bug that only ralph's own check catches.
func demoScenario(prd string) fakeagent.Scenario {
	sleep := fakeagent.Step{Sleep: "300ms"}
	story := func(id, title, op, a, b, want, impl string, first bool) []fakeagent.Step {
		steps := []fakeagent.Step{
			{Say: "Reading .ralph/guardrails.md, .ralph/errors.log, the PRD and the plan section for " + id + "."},
			{Tool: "Bash", Input: "cat calc.sh", Output: "(calc.sh as it is now)"},
			sleep,
		}
		if first {
			steps = append(steps, fakeagent.Step{Write: "calc.sh", Content: demoCalc})
		} else {
			steps = append(steps, fakeagent.Step{Replace: "calc.sh", Old: "  *)", New: impl + "\n  *)"})
		}
		return append(steps,
			fakeagent.Step{Write: "tests/" + op + ".sh", Content: demoTest(op, a, b, want)},
			fakeagent.Step{Say: "Implemented " + title + " and added tests/" + op + ".sh."},
			sleep,
			fakeagent.Step{CheckStory: id, PRD: prd},
			fakeagent.Step{Append: ".ralph/progress.md", Content: demoProgress(id, title+" in calc.sh, test in tests/"+op+".sh")},
		)
	}
	us1 := story("US-001", "Add two numbers", "add", "2", "3", "5", "", true)
	us1 = append(us1, fakeagent.Step{Final: "US-001 is done: add works and is tested. Two stories remain."})
	// The first attempt at US-002 adds instead of subtracting and does not
	// run the tests: exactly the false claim ralph's verification exists for.
	us2bad := story("US-002", "Subtract two numbers", "sub", "7", "2", "5", `  sub) echo $(($2 + $3)) ;;`, false)
	us2bad = append(us2bad, fakeagent.Step{Final: "US-002 is done."})
	us2fix := []fakeagent.Step{
		{Say: "ralph sent US-002 back: its check failed. Reading the failure output in my prompt."},
		{Tool: "Bash", Input: "sh run-tests.sh", Output: "FAIL tests/sub.sh: calc.sh sub 7 2: want 5, got 9"},
		sleep,
		{Replace: "calc.sh", Old: `sub) echo $(($2 + $3))`, New: `sub) echo $(($2 - $3))`},
		{Run: "sh run-tests.sh"},
		{Say: "Fixed: sub used + instead of -. All tests pass now."},
		{CheckStory: "US-002", PRD: prd},
		{Append: ".ralph/progress.md", Content: demoProgress("US-002", "fixed subtraction (was adding); ralph's check caught it")},
		{Append: ".ralph/guardrails.md", Content: "\n## Sign: Run The Tests Before Checking A Story\n- **Trigger**: Before marking a story [x]\n- **Instruction**: Run sh run-tests.sh; ralph reopens stories whose checks fail.\n- **Added after**: US-002 was sent back (demo)\n"},
		{Final: "US-002 is done and verified by the tests. One story remains."},
	}
	us3 := story("US-003", "Multiply two numbers", "mul", "4", "3", "12", `  mul) echo $(($2 * $3)) ;;`, false)
	us3 = append(us3, fakeagent.Step{Run: "sh run-tests.sh"}, fakeagent.Step{Final: "All three stories are checked in the PRD.\n<promise>COMPLETE</promise>"})
	plan := []fakeagent.Step{
		{Say: "Reading the PRD and the code to plan the work."},
		{Tool: "Bash", Input: "ls", Output: "README.md\nrun-tests.sh"},
		sleep,
		{Write: ".ralph/IMPLEMENTATION_PLAN.md", Content: "# Implementation Plan\n\n## US-001: Add two numbers\n- [ ] create calc.sh with an add case\n- [ ] tests/add.sh (verify: sh run-tests.sh)\n\n## US-002: Subtract two numbers\n- [ ] add a sub case\n- [ ] tests/sub.sh\n\n## US-003: Multiply two numbers\n- [ ] add a mul case\n- [ ] tests/mul.sh\n"},
		{Final: "The plan covers all three stories.\n<promise>COMPLETE</promise>"},
	}
	return fakeagent.Scenario{
		Format: fakeagent.FormatClaude,
		Invocations: []fakeagent.Invocation{
			{Match: "write the implementation plan", Steps: plan},
			{Match: "Story: US-001", Steps: us1},
			{Match: "Story: US-002", Times: 1, Steps: us2bad},
			{Match: "Story: US-002", Steps: us2fix},
			{Match: "Story: US-003", Steps: us3},
		},
	}
}

func runDemo(ctx context.Context, opts *DemoOptions) error {
	env := opts.Env
	out := env.IO.Out
	dir := opts.Dir
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "ralph-demo-"); err != nil {
			return err
		}
	} else {
		if _, err := os.Stat(dir); err == nil {
			return usageErrorf("--dir %s already exists: give a new path, the demo creates it", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	self, err := env.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the ralph binary to run the demo agent: %w", err)
	}
	fmt.Fprintf(out, `ralph demo — NO AI RUNS HERE.
The agent in this demo is a scripted stand-in built into ralph: it makes real
edits and real commits from a fixed script, so you can watch ralph's loop
(prompts, logs, verification, a retry, commits) without any AI CLI.

Demo repository: %s
`, dir)

	if err := demoRepo(ctx, dir); err != nil {
		return err
	}
	ws, err := workspace.Open(ctx, dir)
	if err != nil {
		return err
	}
	checks := []check.Check{{Name: "tests", Kind: "test", Run: "sh run-tests.sh", Timeout: time.Minute, Format: "tap"}}
	if _, err := app.Init(ws, env.Now(), checks); err != nil {
		return err
	}
	scenario := ws.Path(".tmp", "demo-agent.json")
	if err := os.MkdirAll(filepath.Dir(scenario), 0o755); err != nil {
		return err
	}
	prdRel := ".agents/tasks/prd.md"
	if err := fakeagent.WriteScenario(scenario, demoScenario(prdRel)); err != nil {
		return err
	}
	// Record the demo agent in the demo's config so that `ralph build` run
	// by hand in that folder later uses it too.
	cfgText, err := os.ReadFile(ws.ConfigPath())
	if err != nil {
		return err
	}
	cfgText = []byte(strings.Replace(string(cfgText), `default = "codex"`, `default = "demo"`, 1) +
		fmt.Sprintf("\n# The scripted stand-in agent of `ralph demo` (no AI).\n[agents.demo]\ncommand = [%q, \"__demo-agent\", \"--scenario\", %q]\nformat = \"claude\"\n", self, scenario))
	if err := store.WriteFileAtomic(ws.ConfigPath(), cfgText, 0o644); err != nil {
		return err
	}
	if err := git(ctx, dir, "add", "-A"); err != nil {
		return err
	}
	if err := git(ctx, dir, "commit", "-q", "-m", "demo: project, PRD and ralph config"); err != nil {
		return err
	}
	a, err := app.Open(ctx, dir, env.Getenv, env.Now)
	if err != nil {
		return err
	}
	spec, err := a.NamedAgent("demo", "[agents.demo]")
	if err != nil {
		return err
	}
	// The demo's run is the template's plain one: none of the
	// verification the configuration could add.
	c := a.LoopOptions(false)
	lo := loop.Options{
		PRDPath: ws.Abs(prdRel), PlanPath: c.PlanPath, RequirePlan: true,
		Agent: spec, AgentTimeout: c.AgentTimeout, Checks: c.Checks,
		Sink: report.Text{W: out}, Now: env.Now,
	}
	fmt.Fprintf(out, "\n$ ralph plan 1\n")
	lo.MaxIterations = 1
	if _, err := loop.Plan(ctx, ws, lo); err != nil {
		return demoErr(err)
	}
	fmt.Fprintf(out, "\n$ ralph build 10\n")
	lo.MaxIterations = 10
	rep, err := loop.Build(ctx, ws, lo)
	if err != nil {
		return demoErr(err)
	}
	board, err := tasks.Open(tasks.KindMarkdown, lo.PRDPath).Load()
	if err != nil {
		return err
	}
	st, _ := loop.HomeOf(ws).Load()
	tally := loop.TallyOf(board, st)
	fmt.Fprintf(out, "\nResult: %s after %s; %d of %s done, %d verified on ralph's own evidence.\n", rep.Outcome, words.Count(rep.Iterations, "build iteration", "build iterations"),
		len(board.Stories)-board.Remaining(), words.Count(len(board.Stories), "story", "stories"), tally.Verified)
	logOut, _ := exec.CommandContext(ctx, "git", "-C", dir, "log", "--oneline").Output()
	fmt.Fprintf(out, "\nCommits:\n%s", indent(string(logOut)))
	fmt.Fprintf(out, `
Look around:
  cd %s
  cat .agents/tasks/prd.md            the PRD, every story checked
  cat .ralph/activity.log             run summary and events
  cat .ralph/errors.log               the failed check and the reopened story
  ls .ralph/runs/%s   prompts, raw output and a summary per iteration

When you are done looking, remove the demo repository:
  rm -rf %s

With a real agent, in your own repository:
  ralph init && ralph prd "what you want built" && ralph plan && ralph build --agent claude
  (or --agent %s)
`, dir, rep.RunID, dir, strings.Join(slices.DeleteFunc(agent.Names(nil), func(n string) bool { return n == "claude" }), ", "))
	if rep.Outcome != loop.OutcomeComplete {
		return fmt.Errorf("the demo did not complete (%s): see %s", rep.Outcome, dir)
	}
	return nil
}

func demoErr(err error) error {
	if errors.Is(err, loop.ErrInterrupted) {
		return &ExitError{Code: ExitInterrupted, Msg: "demo interrupted"}
	}
	return fmt.Errorf("demo: %w", err)
}

// demoRepo creates the demo project as a git repository with a local
// identity, so commits work on a machine where git has never been set up.
func demoRepo(ctx context.Context, dir string) error {
	files := map[string]string{
		"README.md":            "# calc.sh\n\nA demo project for ralph: a tiny calculator in POSIX sh.\n",
		"run-tests.sh":         demoRunTests,
		".agents/tasks/prd.md": demoPRD,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"config", "user.name", "ralph demo"},
		{"config", "user.email", "demo@ralph.invalid"},
		{"config", "commit.gpgsign", "false"},
	} {
		if err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return errors.New("the demo needs git: install it (for example `apt-get install git`) and run again")
		}
		return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}
