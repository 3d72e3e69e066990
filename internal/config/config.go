// Package config reads and writes .ralph/config.toml.
//
// The file is the user's: ralph writes it once at init and afterwards only
// reads it. Unknown keys are errors, because a misspelt key that is silently
// ignored is how a loop ends up running 400 iterations instead of 3.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

// SchemaVersion is the config format this ralph writes and understands.
const SchemaVersion = 1

// Duration is a time.Duration written as "30m", "90s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: use a number with a unit, like \"90s\" or \"30m\"", b)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in Go syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole of config.toml.
type Config struct {
	SchemaVersion int                    `toml:"schema_version"`
	Agent         AgentSection           `toml:"agent"`
	Agents        map[string]AgentConfig `toml:"agents"`
	Build         BuildSection           `toml:"build"`
	Plan          PlanSection            `toml:"plan"`
	Tasks         TasksSection           `toml:"tasks"`
	Loop          LoopSection            `toml:"loop"`
	Validate      ValidateSection        `toml:"validate"`
	Verify        VerifySection          `toml:"verify"`
	Budget        BudgetSection          `toml:"budget"`
	Breaker       BreakerSection         `toml:"breaker"`
	Checks        []CheckConfig          `toml:"checks"`
	Memory        MemorySection          `toml:"memory"`
	Session       SessionSection         `toml:"session"`
	Security      SecuritySection        `toml:"security"`
	Notify        NotifySection          `toml:"notify"`
	Engine        EngineSection          `toml:"engine"`
	Sandbox       SandboxSection         `toml:"sandbox"`
	// Roles picks the agent, and optionally the model, of each role of a
	// `ralph run` session: planner, questioner, executor, reviewer,
	// goal-check. A role without an entry uses the run's agent.
	Roles map[string]RoleConfig `toml:"roles"`
}

// VerifySection sets how much proof ralph asks of an attempt before it
// calls a story done (docs/build.md, Verification).
type VerifySection struct {
	// RequireEvidence sends back a story whose checks all pass but that
	// nothing ralph ran shows done (no failing test fixed, no new test,
	// no verify command that failed before the work, no reviewer), instead
	// of accepting it as "done, agent's word".
	RequireEvidence bool `toml:"require_evidence"`
	// RedGreen counts a test the agent added as evidence only when it
	// fails against the start tree's code (seed 000's RED phase).
	RedGreen bool `toml:"red_green"`
	// Protected are globs of files, besides the tests and the checks' own
	// files that ralph finds itself, whose change makes ralph also run
	// the start's versions against the new code.
	Protected []string `toml:"protected"`
}

// SecuritySection keeps secrets out of what ralph writes.
type SecuritySection struct {
	// Redact names environment variables whose values are masked in every
	// log, record and prompt, besides those named like secrets
	// (*_API_KEY, *_TOKEN, *SECRET*, *PASSWORD*).
	Redact []string `toml:"redact"`
}

// SessionSection is the retry policy of `ralph run` sessions (seed 002).
type SessionSection struct {
	MaxTaskAttempts    int `toml:"max_task_attempts"`
	MaxQACycles        int `toml:"max_qa_cycles"`
	MaxPlanningRetries int `toml:"max_planning_retries"`
	MaxGoalChecks      int `toml:"max_goal_checks"`
	// AgentRetries is how often a failed role run (network error, crash)
	// is retried, waiting RetryBackoff, then twice as long each time.
	AgentRetries int      `toml:"agent_retries"`
	RetryBackoff Duration `toml:"retry_backoff"`
	// MaxTasks bounds a session's task list.
	MaxTasks int `toml:"max_tasks"`
}

// RoleConfig chooses the agent and model of one session role.
type RoleConfig struct {
	Agent string `toml:"agent"`
	Model string `toml:"model"`
}

// RoleNames are the roles [roles.NAME] may configure.
var RoleNames = []string{"planner", "questioner", "executor", "reviewer", "goal-check"}

// MemorySection chooses the memory store.
type MemorySection struct {
	// Store is "sqlite" (embedded, .ralph/memory.db), "neo4j" or "file"
	// (.ralph/memory.jsonl). NEO4J_URI in the environment selects neo4j.
	Store string `toml:"store"`
	// URI is the Neo4j server, e.g. "bolt://localhost:7687"; NEO4J_URI
	// overrides it.
	URI string `toml:"uri"`
	// User is the Neo4j user; NEO4J_USER or NEO4J_USERNAME override it.
	User string `toml:"user"`
	// PasswordEnv names the environment variable holding the password
	// (never the password itself).
	PasswordEnv string `toml:"password_env"`
	// Database is the Neo4j database; empty means the server's default.
	Database string `toml:"database"`
}

// TasksSection chooses the task source.
type TasksSection struct {
	// Source is "prd-md", "prd-json", "progress" or "beads" (the .beads
	// database through bd; "beads:ID" works inside molecule ID); empty
	// means detect: .beads, then progress.txt, then prd.json, then the
	// markdown PRD.
	Source string `toml:"source"`
	// Path is the task file; empty means the source's usual place.
	Path string `toml:"path"`
}

// LoopSection tunes the loop machine.
type LoopSection struct {
	// MaxRetries is the number of failed attempts that blocks a task.
	MaxRetries int `toml:"max_retries"`
	// ContextSoft and ContextHard are the context-window thresholds (in
	// percent) given to the agent.
	ContextSoft int `toml:"context_soft"`
	ContextHard int `toml:"context_hard"`
}

// ValidateSection configures VALIDATE.
type ValidateSection struct {
	// Reviewer is an agent name that judges each story's acceptance
	// criteria; empty means no reviewer (verify commands and, for the
	// markdown PRD, the agent's own checkmarks).
	Reviewer string `toml:"reviewer"`
}

// AgentSection chooses the default agent and bounds each of its runs.
type AgentSection struct {
	// Default is an agent name: a built-in one or a key of [agents].
	Default string `toml:"default"`
	// Timeout bounds one iteration's agent process; 0 means no limit.
	Timeout Duration `toml:"timeout"`
	// IdleTimeout ends an agent run that prints nothing for this long.
	IdleTimeout Duration `toml:"idle_timeout"`
	// Fallbacks are agents rotated to while the default one is cooling
	// down after a usage limit.
	Fallbacks []string `toml:"fallbacks"`
	// LimitCooldown is the rest after a limit that named no reset time.
	LimitCooldown Duration `toml:"limit_cooldown"`
	// LimitPatterns are matched against the agent's final message and
	// reported errors when the CLI gave no structured limit event.
	LimitPatterns []string `toml:"limit_patterns"`
	// MaxLogBytes bounds one agent run's raw log (iter-N.log): past it
	// only its first and last halves are kept.
	MaxLogBytes int64 `toml:"max_log_bytes"`
}

// BudgetSection bounds a run; 0 means no bound.
type BudgetSection struct {
	MaxTokens   int64    `toml:"max_tokens"`
	MaxCostUSD  float64  `toml:"max_cost_usd"`
	MaxWallTime Duration `toml:"max_wall_time"`
}

// BreakerSection configures the circuit breaker.
type BreakerSection struct {
	NoProgress        int      `toml:"no_progress"`
	SameError         int      `toml:"same_error"`
	PermissionDenials int      `toml:"permission_denials"`
	Cooldown          Duration `toml:"cooldown"`
}

// AgentConfig defines or overrides an agent. Command and Interactive are
// argv lists; "{prompt}" in an element is replaced by the path of the
// rendered prompt file, and without it the prompt goes on stdin.
type AgentConfig struct {
	Command     []string `toml:"command"`
	Interactive []string `toml:"interactive"`
	Format      string   `toml:"format"`
}

// BuildSection configures `ralph build`.
type BuildSection struct {
	PRD           string `toml:"prd"`
	Plan          string `toml:"plan"`
	MaxIterations int    `toml:"max_iterations"`
	NoCommit      bool   `toml:"no_commit"`
	// RequirePlan makes build refuse to start without an implementation
	// plan, as seed 001's build machine does.
	RequirePlan bool `toml:"require_plan"`
	// OnFailingBaseline is what a check that already fails before any
	// agent ran does: "judge-new-failures" (attempts fail only on a check
	// that passed at the start) or "stop" (the run does not start).
	OnFailingBaseline string `toml:"on_failing_baseline"`
	// Workers is how many tasks a build works at once (1: one at a time,
	// in the person's checkout; more: each in its own worktree, landed
	// by the merge queue).
	Workers int `toml:"workers"`
	// WorktreeRoot holds the workers' worktrees; "" is
	// ../.ralph-worktrees/<repo>, a relative path is from the repository.
	WorktreeRoot string `toml:"worktree_root"`
	// MinFreeDisk (MB) refuses a parallel build on a fuller disk: every
	// worktree is a full checkout.
	MinFreeDisk int64 `toml:"min_free_disk"`
	// LandAttempts is how many attempts a task gets at landing before it
	// needs review (a conflict or a check failing after integration sends
	// it back to a worker on the new tip).
	LandAttempts int `toml:"land_attempts"`
	// MaxBatch bounds how many verified tasks the merge queue lands
	// together, their checks run once on the combined tree (1: one at a
	// time). A failing batch is bisected.
	MaxBatch int `toml:"max_batch"`
}

// PlanSection configures `ralph plan`.
type PlanSection struct {
	MaxIterations int `toml:"max_iterations"`
}

// CheckConfig is one verification command that ralph runs itself.
type CheckConfig struct {
	Name    string   `toml:"name"`
	Kind    string   `toml:"kind"`
	Run     string   `toml:"run"`
	Timeout Duration `toml:"timeout"`
	// Format is how the runner reports its tests one by one: "go-json"
	// (go test -json), "tap" (on its output), "junit" (in Report), or
	// "none"; empty reads go test -json or TAP output when it is that.
	Format string `toml:"format"`
	// Report is the file (a glob relative to the repository) a JUnit or
	// TAP report is written to; empty: the runner's output.
	Report string `toml:"report"`
}

// Default returns the configuration used when a key is absent.
func Default() Config {
	return Config{
		SchemaVersion: SchemaVersion,
		Agent: AgentSection{Default: "codex", Timeout: Duration{30 * time.Minute}, LimitCooldown: Duration{30 * time.Minute}, MaxLogBytes: 50 << 20,
			LimitPatterns: []string{"usage limit", "rate limit", "hit your limit", "quota exceeded", "resource_exhausted", "too many requests"}},
		Build: BuildSection{
			PRD:               ".agents/tasks/prd.md",
			Plan:              ".ralph/IMPLEMENTATION_PLAN.md",
			MaxIterations:     25,
			RequirePlan:       true,
			OnFailingBaseline: "judge-new-failures",
			Workers:           1,
			MinFreeDisk:       500,
			LandAttempts:      3,
			MaxBatch:          8,
		},
		Plan:    PlanSection{MaxIterations: 1},
		Loop:    LoopSection{MaxRetries: 2, ContextSoft: 70, ContextHard: 80},
		Breaker: BreakerSection{NoProgress: 3, SameError: 3, PermissionDenials: 3, Cooldown: Duration{5 * time.Minute}},
		Memory:  MemorySection{Store: "sqlite", PasswordEnv: "NEO4J_PASSWORD"},
		Notify:  NotifySection{Timeout: Duration{10 * time.Second}},
		Engine:  DefaultEngine(),
		Sandbox: DefaultSandbox(),
		Session: SessionSection{MaxTaskAttempts: 3, MaxQACycles: 3, MaxPlanningRetries: 2, MaxGoalChecks: 3,
			AgentRetries: 3, RetryBackoff: Duration{5 * time.Second}, MaxTasks: 30},
	}
}

// Error is a configuration problem that the user must fix in the file.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// Load reads path over the defaults. A missing file yields the defaults and
// no error, so that ralph works in a workspace made before config existed.
func Load(path string) (Config, error) {
	cfg := Default()
	b, err := inputlimit.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	// BurntSushi/toml's memory grows with the square of nested inline
	// tables and dotted keys; refuse such a file before it gets there.
	if err := inputlimit.CheckTOML(path, b); err != nil {
		return cfg, err
	}
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return cfg, &Error{Path: path, Msg: fmt.Sprintf("line %d, column %d: %s", pe.Position.Line, pe.Position.Col, pe.Message)}
		}
		return cfg, &Error{Path: path, Msg: err.Error()}
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return cfg, &Error{Path: path, Msg: fmt.Sprintf("unknown key %s: check the spelling against docs/configuration.md", strings.Join(keys, ", "))}
	}
	if cfg.SchemaVersion > SchemaVersion {
		return cfg, &Error{Path: path, Msg: fmt.Sprintf("schema_version %d is newer than this ralph understands (%d): upgrade ralph", cfg.SchemaVersion, SchemaVersion)}
	}
	if err := cfg.validate(); err != nil {
		return cfg, &Error{Path: path, Msg: err.Error()}
	}
	return cfg, nil
}

func (c Config) validate() error {
	if err := c.Sandbox.validate(); err != nil {
		return err
	}
	if c.Build.MaxIterations < 0 || c.Plan.MaxIterations < 0 {
		return errors.New("max_iterations must not be negative")
	}
	if c.Build.Workers < 1 {
		return fmt.Errorf("[build] workers = %d: use 1 (one task at a time) or more (tasks in parallel worktrees)", c.Build.Workers)
	}
	if c.Build.LandAttempts < 1 {
		return fmt.Errorf("[build] land_attempts = %d: use 1 or more", c.Build.LandAttempts)
	}
	if c.Build.MaxBatch < 1 {
		return fmt.Errorf("[build] max_batch = %d: use 1 (one landing at a time) or more (verified tasks landed together)", c.Build.MaxBatch)
	}
	if c.Build.MinFreeDisk < 0 {
		return fmt.Errorf("[build] min_free_disk = %d: use a number of megabytes, 0 or more", c.Build.MinFreeDisk)
	}
	if c.Agent.MaxLogBytes < 1<<10 {
		return fmt.Errorf("[agent] max_log_bytes = %d: use at least 1024 (bytes; the default is 52428800, 50 MB)", c.Agent.MaxLogBytes)
	}
	switch src := c.Tasks.Source; {
	case src == "", src == "prd-md", src == "prd-json", src == "progress", src == "beads":
	case strings.HasPrefix(src, "beads:") && strings.TrimSpace(src[len("beads:"):]) != "":
	default:
		return fmt.Errorf("[tasks] source = %q: use prd-md, prd-json, progress, beads or beads:MOLECULE-ID (or leave it empty to detect)", c.Tasks.Source)
	}
	switch c.Build.OnFailingBaseline {
	case "judge-new-failures", "stop":
	default:
		return fmt.Errorf("[build] on_failing_baseline = %q: use \"judge-new-failures\" (a check failing before any agent ran is not held against attempts) or \"stop\"", c.Build.OnFailingBaseline)
	}
	if c.Budget.MaxTokens < 0 || c.Budget.MaxCostUSD < 0 {
		return errors.New("[budget] values must not be negative")
	}
	if c.Breaker.NoProgress < 0 || c.Breaker.SameError < 0 || c.Breaker.PermissionDenials < 0 {
		return errors.New("[breaker] thresholds must not be negative (0 turns one off)")
	}
	if c.Loop.MaxRetries < 1 {
		return errors.New("[loop] max_retries must be at least 1")
	}
	if c.Loop.ContextSoft < 1 || c.Loop.ContextHard > 100 || c.Loop.ContextSoft > c.Loop.ContextHard {
		return errors.New("[loop] context_soft and context_hard are percentages with context_soft <= context_hard <= 100")
	}
	switch c.Memory.Store {
	case "sqlite", "neo4j", "file":
	default:
		return fmt.Errorf("[memory] store = %q: use sqlite, neo4j or file", c.Memory.Store)
	}
	if u := c.Memory.URI; u != "" && !hasNeo4jScheme(u) {
		return fmt.Errorf("[memory] uri = %q: use a neo4j://, neo4j+s://, bolt:// or bolt+s:// address", u)
	}
	if strings.ContainsAny(c.Memory.PasswordEnv, " =$") {
		return fmt.Errorf("[memory] password_env = %q: give the name of an environment variable, not the password", c.Memory.PasswordEnv)
	}
	for name, a := range c.Agents {
		if len(a.Command) == 0 && len(a.Interactive) == 0 {
			return fmt.Errorf("[agents.%s] needs command = [\"program\", \"args\"...]", name)
		}
	}
	if s := c.Session; s.MaxTaskAttempts < 1 || s.MaxQACycles < 1 || s.MaxPlanningRetries < 1 || s.MaxGoalChecks < 1 || s.AgentRetries < 0 || s.MaxTasks < 1 {
		return errors.New("[session] max_task_attempts, max_qa_cycles, max_planning_retries, max_goal_checks and max_tasks must be at least 1; agent_retries must not be negative")
	}
	for name := range c.Roles {
		known := false
		for _, r := range RoleNames {
			known = known || r == name
		}
		if !known {
			return fmt.Errorf("[roles.%s] is not a role: use %s", name, strings.Join(RoleNames, ", "))
		}
	}
	for _, name := range c.Security.Redact {
		if name == "" || strings.ContainsAny(name, " =$") {
			return fmt.Errorf("[security] redact = [%q]: list names of environment variables, such as \"DEPLOY_KEY\", not their values", name)
		}
	}
	if err := c.Notify.validate(); err != nil {
		return err
	}
	if err := c.Engine.validate(); err != nil {
		return err
	}
	for i, ch := range c.Checks {
		if strings.TrimSpace(ch.Run) == "" {
			return fmt.Errorf("[[checks]] entry %d has no run command", i+1)
		}
		switch ch.Kind {
		case "", "typecheck", "lint", "test", "e2e":
		default:
			return fmt.Errorf("[[checks]] %q has kind %q: use typecheck, lint, test or e2e", ch.Name, ch.Kind)
		}
		switch ch.Format {
		case "", "go-json", "junit", "tap", "none":
		default:
			return fmt.Errorf("[[checks]] %q has format %q: use go-json (go test -json), junit (with report = \"path/to/report.xml\"), tap, or none (judged by its exit code)", ch.Name, ch.Format)
		}
		if ch.Format == "junit" && ch.Report == "" {
			return fmt.Errorf("[[checks]] %q has format \"junit\" but no report: name the file its runner writes, for example report = \"build/test-results/junit.xml\"", ch.Name)
		}
		if r := ch.Report; r != "" && (strings.HasPrefix(r, "/") || r == ".." || strings.HasPrefix(r, "../") || strings.Contains(r, "/../")) {
			return fmt.Errorf("[[checks]] %q has report %q: give a path inside the repository, relative to it", ch.Name, r)
		}
	}
	for _, g := range c.Verify.Protected {
		if strings.TrimSpace(g) == "" || strings.HasPrefix(g, "/") || strings.HasPrefix(g, "../") {
			return fmt.Errorf("[verify] protected = [%q]: give globs relative to the repository, such as \"tests/**\" or \"**/*.snap\"", g)
		}
		if _, err := path.Match(strings.ReplaceAll(g, "**", "x"), ""); err != nil {
			return fmt.Errorf("[verify] protected = [%q]: %v", g, err)
		}
	}
	return nil
}

func hasNeo4jScheme(uri string) bool {
	for _, p := range []string{"neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://"} {
		if strings.HasPrefix(uri, p) {
			return true
		}
	}
	return false
}
