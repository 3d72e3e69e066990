package agent

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ralphloop/ralph/internal/proc"
)

// PromptPlaceholder in an argv element stands for the path of the rendered
// prompt file. An argv without it gets the prompt on stdin. The prompt is
// never put on a command line itself: large prompts overflow ARG_MAX.
const PromptPlaceholder = "{prompt}"

// Spec describes one agent CLI as data: how to start it headless and
// interactively, and how to read its output.
type Spec struct {
	Name string
	// Headless is the argv for unattended runs (build, plan).
	Headless []string
	// Interactive is the argv for runs with a person at the terminal (prd).
	Interactive []string
	// Format is the format of Headless's stdout.
	Format Format
	// InstallHint tells a person how to get the binary.
	InstallHint string
	// LoginHint tells a person how to give the CLI its credentials, for
	// when it answers that it is not logged in ("" for generic advice).
	LoginHint string
	// Builtin is false for agents defined in config or AGENT_CMD.
	Builtin bool
	// ModelFlag is the CLI's option that picks the model ("" when it has
	// none), inserted at ModelAt in Headless, after the program and its
	// subcommand, so that it can never split another option from its value.
	ModelFlag string
	ModelAt   int
	// State are the CLI's own files and folders (its login, settings,
	// transcripts), relative to the home folder: a sandbox hides the
	// home, so these are the parts of it the agent keeps writable.
	State []string
	// CredentialEnv names the variables that carry the CLI's credentials
	// or point it at its API: a sandbox passes these on and no others
	// besides its own short list.
	CredentialEnv []string
	// Hosts are the API hosts the CLI talks to by default: the allow
	// list of a sandbox with network "proxy".
	Hosts []string
	// BaseURLEnv name the variables that point the CLI at another API
	// endpoint (a gateway, a local model server): when one is set, its
	// URL's host and port replace Hosts in the allow list.
	BaseURLEnv []string
}

// WithModel returns s set to run model. An empty model returns s as is; an
// agent without a model option is an error that says how to choose one.
func WithModel(s Spec, model string) (Spec, error) {
	if model == "" {
		return s, nil
	}
	if s.ModelFlag == "" || s.ModelAt < 1 || s.ModelAt > len(s.Headless) {
		return s, fmt.Errorf("agent %s has no model option ralph knows: define [agents.NAME] with the model in its command and use that agent", s.Name)
	}
	argv := make([]string, 0, len(s.Headless)+2)
	argv = append(argv, s.Headless[:s.ModelAt]...)
	argv = append(argv, s.ModelFlag, model)
	s.Headless = append(argv, s.Headless[s.ModelAt:]...)
	return s, nil
}

// nestingEnv lists inherited variables that make a nested agent CLI
// refuse to start or change its behaviour (Claude Code refuses to run
// inside itself). The notification secret is withheld from every program
// ralph starts (proc.Withhold).
var nestingEnv = []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"}

// StripEnv keeps the variables named from every agent's and every
// check's environment (config's [notify] secret_env).
func StripEnv(names ...string) { proc.Withhold(names...) }

// builtins are the supported CLIs with their current headless flags (see
// docs/agents.md's agent table). Structured output is preferred so that signals
// come from the final assistant message, not from raw text.
var builtins = []Spec{
	{
		Name:          "codex",
		ModelFlag:     "--model",
		ModelAt:       2,
		Headless:      []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "-"},
		Interactive:   []string{"codex", "--dangerously-bypass-approvals-and-sandbox", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatCodex,
		InstallHint:   "npm install -g @openai/codex",
		LoginHint:     "run `codex login`, or set OPENAI_API_KEY",
		State:         []string{".codex"},
		CredentialEnv: []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"},
		Hosts:         []string{"api.openai.com", "chatgpt.com"},
		BaseURLEnv:    []string{"OPENAI_BASE_URL"},
	},
	{
		Name:      "claude",
		ModelFlag: "--model",
		ModelAt:   1,
		// -p goes last: Claude Code 2.1.197 given -p as its first
		// argument takes about 60 ms longer to reach its first request
		// (measured in bench/argorder_test.go), the same work otherwise.
		Headless:      []string{"claude", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "-p"},
		Interactive:   []string{"claude", "--dangerously-skip-permissions", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatClaude,
		InstallHint:   "npm install -g @anthropic-ai/claude-code",
		LoginHint:     "run `claude login` (or /login inside `claude`), or set ANTHROPIC_API_KEY",
		State:         []string{".claude", ".claude.json"},
		CredentialEnv: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "IS_SANDBOX"}, // IS_SANDBOX: without it Claude Code refuses --dangerously-skip-permissions as root
		Hosts:         []string{"api.anthropic.com"},
		BaseURLEnv:    []string{"ANTHROPIC_BASE_URL"},
	},
	{
		Name:          "droid",
		ModelFlag:     "--model",
		ModelAt:       2,
		Headless:      []string{"droid", "exec", "--skip-permissions-unsafe", "-o", "stream-json", "-f", PromptPlaceholder},
		Interactive:   []string{"droid", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatDroid,
		InstallHint:   "see docs.factory.ai/cli to install droid",
		LoginHint:     "run `droid` once and log in, or set FACTORY_API_KEY",
		State:         []string{".factory"},
		CredentialEnv: []string{"FACTORY_API_KEY"},
		Hosts:         []string{"api.factory.ai"},
	},
	{
		Name:          "opencode",
		ModelFlag:     "--model",
		ModelAt:       2,
		Headless:      []string{"opencode", "run", "--format", "json", "--auto"},
		Interactive:   []string{"opencode", "--prompt", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatOpencode,
		InstallHint:   "npm install -g opencode-ai",
		LoginHint:     "run `opencode auth login`",
		State:         []string{".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode"}, // the cache holds the packages and tools it installs, the state its locks and model choice
		CredentialEnv: []string{"OPENCODE_CONFIG", "OPENCODE_PERMISSION", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"},
		Hosts:         []string{"api.anthropic.com", "api.openai.com"},
	},
	{
		Name:          "gemini",
		ModelFlag:     "--model",
		ModelAt:       1,
		Headless:      []string{"gemini", "-o", "stream-json", "--yolo", "--skip-trust"},
		Interactive:   []string{"gemini", "--yolo", "-i", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatGemini,
		InstallHint:   "npm install -g @google/gemini-cli",
		LoginHint:     "run `gemini` once and choose how to sign in, or set GEMINI_API_KEY",
		State:         []string{".gemini"},
		CredentialEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME"},
		Hosts:         []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com"},
		BaseURLEnv:    []string{"GOOGLE_GEMINI_BASE_URL", "CODE_ASSIST_ENDPOINT"},
	},
	{
		Name:          "amp",
		Headless:      []string{"amp", "-x", "--stream-json", "--dangerously-allow-all"},
		Interactive:   []string{"amp", "--dangerously-allow-all"},
		Format:        FormatClaude,
		InstallHint:   "npm install -g @sourcegraph/amp",
		LoginHint:     "run `amp login`, or set AMP_API_KEY",
		State:         []string{".config/amp", ".local/share/amp"},
		CredentialEnv: []string{"AMP_API_KEY"},
		Hosts:         []string{"ampcode.com"},
	},
	{
		Name:          "cursor-agent",
		ModelFlag:     "--model",
		ModelAt:       1,
		Headless:      []string{"cursor-agent", "-p", "--force", "--output-format", "stream-json", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Interactive:   []string{"cursor-agent", "--force", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatCursor,
		InstallHint:   "see cursor.com/cli to install cursor-agent",
		LoginHint:     "run `cursor-agent login`, or set CURSOR_API_KEY",
		State:         []string{".cursor", ".config/cursor"},
		CredentialEnv: []string{"CURSOR_API_KEY"},
		Hosts:         []string{"api2.cursor.sh"},
	},
	{
		Name:          "copilot",
		ModelFlag:     "--model",
		ModelAt:       1,
		Headless:      []string{"copilot", "--allow-all-tools", "--no-ask-user", "-p", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Interactive:   []string{"copilot", "--allow-all-tools", "-i", "Read the file " + PromptPlaceholder + " and follow its instructions."},
		Format:        FormatPlain,
		InstallHint:   "npm install -g @github/copilot",
		LoginHint:     "run `copilot` and /login, or set COPILOT_GITHUB_TOKEN",
		State:         []string{".copilot"},
		CredentialEnv: []string{"COPILOT_GITHUB_TOKEN", "GITHUB_TOKEN", "GH_TOKEN"},
		Hosts:         []string{"api.githubcopilot.com", "api.github.com"},
	},
}

// DefaultName is the agent used when nothing else chooses one (seed 001).
const DefaultName = "codex"

// Builtins returns the built-in agents in table order.
func Builtins() []Spec {
	out := make([]Spec, len(builtins))
	for i, s := range builtins {
		s.Builtin = true
		out[i] = s
	}
	return out
}

// Custom is an agent defined in config.
type Custom struct {
	Command     []string
	Interactive []string
	Format      string
}

// Choice carries every source of the agent selection, in precedence order:
// the --agent flag, then AGENT_CMD, then config, then DefaultName.
type Choice struct {
	Flag          string
	Env           string
	ConfigDefault string
	Custom        map[string]Custom
}

// UnknownError is returned for an agent name that nothing defines.
type UnknownError struct {
	Name   string
	Source string
	Known  []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown agent %q (from %s): use one of %s, or define [agents.%s] in .ralph/config.toml",
		e.Name, e.Source, strings.Join(e.Known, ", "), e.Name)
}

// Resolve picks the agent. It returns the spec and where the choice came
// from ("--agent", "AGENT_CMD", "config", "default").
func Resolve(c Choice) (Spec, string, error) {
	switch {
	case c.Flag != "":
		s, err := lookup(c.Flag, "--agent", c.Custom)
		return s, "--agent", err
	case strings.TrimSpace(c.Env) != "":
		env := strings.TrimSpace(c.Env)
		if s, err := lookup(env, "AGENT_CMD", c.Custom); err == nil {
			return s, "AGENT_CMD", nil
		}
		argv, err := SplitCommand(env)
		if err != nil {
			return Spec{}, "AGENT_CMD", fmt.Errorf("AGENT_CMD: %w", err)
		}
		if len(argv) == 1 && !strings.ContainsAny(argv[0], "/") {
			// A single word that is no known agent is far more likely a
			// misspelt name than a custom CLI without arguments.
			if _, lerr := exec.LookPath(argv[0]); lerr != nil {
				return Spec{}, "AGENT_CMD", &UnknownError{Name: argv[0], Source: "AGENT_CMD", Known: names(c.Custom)}
			}
		}
		return Spec{Name: "custom", Headless: argv, Interactive: argv, Format: FormatPlain}, "AGENT_CMD", nil
	case c.ConfigDefault != "":
		s, err := lookup(c.ConfigDefault, "config", c.Custom)
		return s, "config", err
	default:
		s, err := lookup(DefaultName, "default", c.Custom)
		return s, "default", err
	}
}

func lookup(name, source string, custom map[string]Custom) (Spec, error) {
	if cu, ok := custom[name]; ok {
		f := FormatPlain
		if cu.Format != "" {
			var err error
			if f, err = ParseFormat(cu.Format); err != nil {
				return Spec{}, fmt.Errorf("[agents.%s] format: %w", name, err)
			}
		}
		s := Spec{Name: name, Headless: cu.Command, Interactive: cu.Interactive, Format: f}
		if base, ok := builtin(name); ok {
			// A config table named like a built-in overrides only what it sets.
			if len(s.Headless) == 0 {
				s.Headless = base.Headless
			}
			if len(s.Interactive) == 0 {
				s.Interactive = base.Interactive
			}
			if cu.Format == "" {
				s.Format = base.Format
			}
			s.InstallHint = base.InstallHint
			s.LoginHint = base.LoginHint
		}
		if len(s.Interactive) == 0 {
			s.Interactive = s.Headless
		}
		if len(s.Headless) == 0 {
			s.Headless = s.Interactive
		}
		return s, nil
	}
	if s, ok := builtin(name); ok {
		return s, nil
	}
	return Spec{}, &UnknownError{Name: name, Source: source, Known: names(custom)}
}

func builtin(name string) (Spec, bool) {
	for _, s := range Builtins() {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

func names(custom map[string]Custom) []string {
	var out []string
	for _, s := range builtins {
		out = append(out, s.Name)
	}
	var extra []string
	for n := range custom {
		if _, ok := builtin(n); !ok {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// MissingError says that the agent's program is not installed.
type MissingError struct {
	Spec    Spec
	Program string
}

func (e *MissingError) Error() string {
	msg := fmt.Sprintf("agent %q needs %q, which is not installed or not on PATH", e.Spec.Name, e.Program)
	if e.Spec.InstallHint != "" {
		msg += ": install it with `" + e.Spec.InstallHint + "`"
	}
	return msg + ", or choose another agent with --agent"
}

// CheckInstalled reports a *MissingError when argv's program cannot be run.
func CheckInstalled(s Spec, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("agent %q has no command", s.Name)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return &MissingError{Spec: s, Program: argv[0]}
	}
	return nil
}

// SplitCommand splits a command line into words the way a POSIX shell
// would for simple quoting (single quotes, double quotes, backslashes), but
// without running a shell: no expansion, no pipes, no substitution.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}

// Names lists the agents a name can pick: the built-in ones in their
// order, then those config defines, sorted (shell completion offers them).
func Names(custom map[string]Custom) []string { return names(custom) }

// StateIn returns s's state files and folders under home, absolute.
func (s Spec) StateIn(home string) []string {
	out := make([]string, len(s.State))
	for i, p := range s.State {
		out[i] = filepath.Join(home, p)
	}
	return out
}
