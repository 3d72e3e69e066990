package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/text"
)

// ProbeTimeout bounds each command that Diagnose runs (`--version` and
// `--help`). A probe that outlives it is killed with its process group.
const ProbeTimeout = 10 * time.Second

// probeOutputMax bounds the output of one probe held in memory.
const probeOutputMax = 1 << 20

// Runner runs argv to completion and returns its standard output and
// standard error together. The error is non-nil when the program could not
// start, exited non-zero or was stopped because ctx ended; the output read
// so far is returned with it.
type Runner func(ctx context.Context, argv []string) (string, error)

// Diagnosis is what `ralph doctor` found out about one agent.
type Diagnosis struct {
	Name string `json:"name"`
	// Program is the first element of the headless argv.
	Program string `json:"program"`
	// Path is where Program was found on PATH, "" when it was not.
	Path      string `json:"path"`
	Installed bool   `json:"installed"`
	// Probed is true when doctor ran the program's --version and --help.
	// It runs only the programs of the built-in agents, whose --version
	// and --help are known to be harmless; any other program could be a
	// script that starts a whole agent run on any arguments, so doctor
	// only checks that it exists and is executable.
	Probed bool `json:"probed"`
	// Version is the first line of `<program> --version`, "unknown" when
	// that failed, and "" when the program is not installed or not probed.
	Version string `json:"version"`
	// HelpArgv is the help command whose text the flags were checked
	// against; nil when no flag needed checking.
	HelpArgv []string `json:"-"`
	// FlagsChecked are the flags of the headless argv (without "=value").
	FlagsChecked []string `json:"flags_checked"`
	// FlagsMissing are the checked flags that the help text does not list.
	FlagsMissing []string `json:"flags_missing"`
	// Problems has one self-contained line per problem, each starting
	// with the agent's name.
	Problems []string `json:"problems"`
}

// Prober runs the probes of Diagnose. Its zero value probes the real
// system; tests replace Run and LookPath.
type Prober struct {
	// Run runs one probe; nil means running the real program.
	Run Runner
	// LookPath finds a program on PATH; nil means exec.LookPath.
	LookPath func(file string) (string, error)
	// Timeout bounds each probe; 0 means ProbeTimeout.
	Timeout time.Duration
}

// Diagnose checks one agent with the real system: whether its headless
// program is installed, its version, and whether its help still lists every
// flag ralph passes to it.
func Diagnose(ctx context.Context, s Spec) Diagnosis {
	return Prober{}.Diagnose(ctx, s)
}

// Diagnose checks one agent; see the package-level Diagnose.
func (p Prober) Diagnose(ctx context.Context, s Spec) Diagnosis {
	d := Diagnosis{Name: s.Name, FlagsChecked: []string{}, FlagsMissing: []string{}, Problems: []string{}}
	if len(s.Headless) == 0 {
		d.Problems = append(d.Problems, fmt.Sprintf("%s: has no command; set command = [\"program\", \"args\"...] in [agents.%s]", s.Name, s.Name))
		return d
	}
	d.Program = s.Headless[0]
	look := p.LookPath
	if look == nil {
		look = exec.LookPath
	}
	path, err := look(d.Program)
	if err != nil {
		d.Problems = append(d.Problems, notInstalled(s, d.Program, err))
		return d
	}
	d.Path, d.Installed = path, true
	if !KnownProgram(d.Program) {
		return d
	}
	d.Probed = true

	d.Version = "unknown"
	if out, err := p.probe(ctx, []string{d.Program, "--version"}); err == nil {
		if line := firstLine(out); line != "" {
			d.Version = line
		}
	}

	d.FlagsChecked = append(d.FlagsChecked, HeadlessFlags(s.Headless)...)
	if len(d.FlagsChecked) == 0 {
		return d
	}
	d.HelpArgv = HelpArgv(s.Headless)
	help, err := p.probe(ctx, d.HelpArgv)
	if err != nil {
		if ctx.Err() == nil {
			d.Problems = append(d.Problems, fmt.Sprintf("%s: could not check its flags: `%s` %s", s.Name, strings.Join(d.HelpArgv, " "), describeFailure(err, help, p.timeout())))
		}
		return d
	}
	// Colour codes would glue themselves to the flag names.
	help = stripANSI(help)
	for _, f := range d.FlagsChecked {
		if !HelpLists(help, f) {
			d.FlagsMissing = append(d.FlagsMissing, f)
		}
	}
	if len(d.FlagsMissing) > 0 {
		d.Problems = append(d.Problems, missingFlags(s, d.FlagsMissing))
	}
	return d
}

func (p Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return ProbeTimeout
}

// errProbeTimeout reports that a probe ran out of time.
var errProbeTimeout = errors.New("timed out")

// probe runs argv within the probe timeout. It returns errProbeTimeout
// (wrapped) when the timeout, not the caller's ctx, ended the run.
func (p Prober) probe(ctx context.Context, argv []string) (string, error) {
	run := p.Run
	if run == nil {
		run = runProbe
	}
	pctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	out, err := run(pctx, argv)
	if err != nil && ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return out, fmt.Errorf("%w after %s", errProbeTimeout, p.timeout())
	}
	return out, err
}

// describeFailure words a failed help probe for a problem line.
func describeFailure(err error, out string, timeout time.Duration) string {
	if errors.Is(err, errProbeTimeout) {
		return fmt.Sprintf("did not finish within %s", timeout)
	}
	msg := "failed: " + err.Error()
	if line := firstLine(stripANSI(out)); line != "" {
		msg += ": " + text.Clip(line, 200)
	}
	return msg
}

// runProbe runs argv in its own process group with stdin on /dev/null and
// the agent environment; ending ctx kills the whole group.
func runProbe(ctx context.Context, argv []string) (string, error) {
	buf := &cappedBuffer{max: probeOutputMax}
	out, err := proc.Run(ctx, proc.Spec{
		Args:   argv,
		Env:    Env(),
		Stdout: buf,
		Stderr: buf,
		Grace:  time.Second,
	})
	text := buf.String()
	switch {
	case err != nil:
		return text, err
	case out.Interrupted || out.TimedOut:
		if ctx.Err() != nil {
			return text, ctx.Err()
		}
		return text, errors.New("stopped")
	case out.ExitCode < 0:
		return text, errors.New("killed by a signal")
	case out.ExitCode != 0:
		return text, fmt.Errorf("exit status %d", out.ExitCode)
	}
	return text, nil
}

// cappedBuffer keeps the first max bytes written to it and discards the
// rest, so that a probe that floods output cannot exhaust memory.
type cappedBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// HeadlessFlags returns the flags in argv[1:], in order and without
// duplicates: the elements that start with "-", cut before any "=".
// Operands, "{prompt}" arguments, "-" (stdin) and everything after "--"
// are not flags.
func HeadlessFlags(argv []string) []string {
	var out []string
	for i, a := range argv {
		if i == 0 {
			continue
		}
		if a == "--" {
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") || strings.Contains(a, PromptPlaceholder) {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// HelpArgv returns the help command for a headless argv: the help of the
// subcommand ralph uses when the program is a built-in agent's program run
// with that agent's subcommand (`codex exec --help`), and `<program>
// --help` otherwise.
func HelpArgv(argv []string) []string {
	prog := argv[0]
	if len(argv) > 1 {
		if sub := subcommand(filepath.Base(prog)); sub != "" && argv[1] == sub {
			return []string{prog, sub, "--help"}
		}
	}
	return []string{prog, "--help"}
}

// subcommand returns the subcommand the built-in agents run program with
// (exec for codex, run for opencode), "" when they use none.
func subcommand(program string) string {
	for _, b := range builtins {
		if len(b.Headless) > 1 && filepath.Base(b.Headless[0]) == program {
			if a := b.Headless[1]; !strings.HasPrefix(a, "-") && !strings.Contains(a, PromptPlaceholder) {
				return a
			}
		}
	}
	return ""
}

// HelpLists reports whether help mentions flag as a whole word: "-p" is
// found in "-p, --print" but not inside "--print" or "--skip-permissions",
// and "--verbose" is not found in "--verbose-log".
func HelpLists(help, flag string) bool {
	for i := 0; i < len(help); {
		j := strings.Index(help[i:], flag)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(flag)
		if (j == 0 || !isFlagChar(help[j-1])) && (end == len(help) || !isFlagChar(help[end])) {
			return true
		}
		i = j + 1
	}
	return false
}

func isFlagChar(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// firstLine returns the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

// KnownProgram reports whether program is the program of a built-in agent
// (codex, claude, ...), whose --version and --help print text and exit.
func KnownProgram(program string) bool {
	base := filepath.Base(program)
	for _, b := range builtins {
		if len(b.Headless) > 0 && filepath.Base(b.Headless[0]) == base {
			return true
		}
	}
	return false
}

func notInstalled(s Spec, program string, err error) string {
	// A path names one file: say whether it is missing or only lacks
	// its execute permission, which LookPath reports as ErrPermission.
	if strings.ContainsRune(program, filepath.Separator) {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Sprintf("%s: %s is not executable: make it so with chmod +x %s, or fix the command in %s", s.Name, program, program, configPlace(s.Name))
		}
		return fmt.Sprintf("%s: %s does not exist: fix the command in %s", s.Name, program, configPlace(s.Name))
	}
	switch hint := s.InstallHint; {
	case strings.HasPrefix(hint, "see "):
		return fmt.Sprintf("%s: not installed: %s", s.Name, hint)
	case hint != "":
		return fmt.Sprintf("%s: not installed: install it with %s", s.Name, hint)
	default:
		return fmt.Sprintf("%s: not installed: %q is not on PATH; install it or fix the command in %s", s.Name, program, configPlace(s.Name))
	}
}

// missingFlags words the problem of flags that the help no longer lists,
// blaming ralph's default command or the user's own one.
func missingFlags(s Spec, missing []string) string {
	list := strings.Join(missing, ", ")
	if base, ok := builtin(s.Name); ok && slices.Equal(base.Headless, s.Headless) {
		return fmt.Sprintf("%s: its help no longer lists %s; ralph's default command may be out of date (override it in [agents.%s])", s.Name, list, s.Name)
	}
	return fmt.Sprintf("%s: its help does not list %s; check the command in %s", s.Name, list, configPlace(s.Name))
}

// configPlace names where a person sets an agent's command.
func configPlace(name string) string {
	if name == "custom" {
		// Resolve names an AGENT_CMD command line "custom".
		return "AGENT_CMD (or [agents.custom] in .ralph/config.toml)"
	}
	return "[agents." + name + "] in .ralph/config.toml"
}
