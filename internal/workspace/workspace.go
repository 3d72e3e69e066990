// Package workspace knows the layout of a ralph workspace: a git repository
// with a .ralph folder holding configuration, logs and machine state.
//
// It creates missing state files from their templates and never overwrites
// a file that exists. Only commands that write call EnsureStateFiles, and
// only once their input is known to be good: a read, or a command that
// fails on bad input, leaves the repository as it found it.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/store"
)

// DirName is the name of ralph's folder at the top of the repository.
const DirName = ".ralph"

// Workspace is an opened workspace. Root is the repository's top level.
type Workspace struct {
	Root string
	Repo *gitx.Repo
}

// Open finds the repository that contains dir. It fails with
// gitx.ErrNotRepo outside a git repository. It does not require .ralph to
// exist yet.
func Open(ctx context.Context, dir string) (*Workspace, error) {
	repo, err := gitx.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	w := &Workspace{Root: repo.Dir, Repo: repo}
	if err := w.checkDir(); err != nil {
		return nil, err
	}
	return w, nil
}

// checkDir refuses a .ralph that is not this repository's own: a symlink
// that leads outside the repository (two repositories linked to one folder
// would share one state, one lock and one run, and resume each other's
// work), a dangling one, or a file. A symlink to a folder inside the
// repository is the user's layout and is kept.
func (w *Workspace) checkDir() error {
	p := w.Dir()
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		link, _ := os.Readlink(p)
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("%s is a symlink to %s, which cannot be followed (%v): replace it with a folder (`rm %s && ralph init`)", DirName, link, err, DirName)
		}
		root, err := filepath.EvalSymlinks(w.Root)
		if err != nil {
			return err
		}
		if r, err := filepath.Rel(root, target); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s is a symlink to %s, outside this repository: ralph keeps each repository's state, lock and runs in its own %s, and a shared one would mix their runs; replace the link with a folder of this repository's own (`rm %s && ralph init`)", DirName, target, DirName, DirName)
		}
		if fi, err = os.Stat(p); err != nil {
			return err
		}
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder: move it aside and run `ralph init`", DirName)
	}
	return nil
}

// Dir is the .ralph folder.
func (w *Workspace) Dir() string { return filepath.Join(w.Root, DirName) }

// Exists reports whether the .ralph folder is there: read commands answer
// from it when it is, and with an empty answer, creating nothing, when it
// is not.
func (w *Workspace) Exists() bool {
	fi, err := os.Stat(w.Dir())
	return err == nil && fi.IsDir()
}

// GoneError says that .ralph/ disappeared while a command was writing to
// it, which only someone else can have done: the agent, a script, a
// person.
type GoneError struct {
	Err error
	// Again is the command that starts over, such as "ralph build".
	Again string
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("%s/ was deleted while ralph was working (by the agent?): ralph stopped. "+
		"Bring back its committed files with `git checkout -- %s` (or make a fresh one with `ralph init`), then run `%s` to start again",
		DirName, DirName, e.Again)
}

func (e *GoneError) Unwrap() error { return e.Err }

// Gone turns err into a *GoneError when .ralph/ is missing. The caller
// calls it only for work that began in a set-up .ralph/, so someone
// deleted it under the work, and whatever failed next (a temporary file
// deep in .ralph, files "changed" by the deletion) is not what the user
// needs to hear. again is the command that starts over. Any other error
// is returned as is.
func (w *Workspace) Gone(err error, again string) error {
	if err == nil || w.Exists() {
		return err
	}
	var ge *GoneError
	if errors.As(err, &ge) {
		return err
	}
	return &GoneError{Err: err, Again: again}
}

// Path joins elements below .ralph.
func (w *Workspace) Path(elem ...string) string {
	return filepath.Join(append([]string{w.Dir()}, elem...)...)
}

// Abs resolves a path from config or a flag: relative paths are taken from
// the repository root, not from the current directory, so that ralph behaves
// the same from any subfolder.
func (w *Workspace) Abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(w.Root, p)
}

// Rel returns p relative to the repository root when it lies inside it.
func (w *Workspace) Rel(p string) string {
	r, err := filepath.Rel(w.Root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return p
	}
	return r
}

// Well-known files.
func (w *Workspace) ConfigPath() string      { return w.Path("config.toml") }
func (w *Workspace) PromptsDir() string      { return w.Path("prompts") }
func (w *Workspace) ProgressPath() string    { return w.Path("progress.md") }
func (w *Workspace) GuardrailsPath() string  { return w.Path("guardrails.md") }
func (w *Workspace) ErrorsLogPath() string   { return w.Path("errors.log") }
func (w *Workspace) ActivityLogPath() string { return w.Path("activity.log") }
func (w *Workspace) RunsDir() string         { return w.Path("runs") }
func (w *Workspace) LockPath() string        { return w.Path("lock") }

// gitignore keeps machine state out of git: resetting the work to a
// baseline must never rewind ralph's own records, and logs that change
// after every iteration would leave the tree permanently dirty.
const gitignore = `# ralph machine state and operational logs (not committed).
runs/
threads/
sessions/
beads.json
*.tmp
.tmp/
events.jsonl
state.json
cooldowns.json*
parallel.json
lock
memory.db*
memory.jsonl
memory-queue.jsonl*
context.md
control/
active_thread
spec/threads/
errors.log
activity.log
reports/
notify-warned
`

func progressTemplate(now time.Time) string {
	return fmt.Sprintf(`# Progress Log
Started: %s

## Codebase Patterns
- (add reusable patterns here)

---
`, now.Format("2006-01-02"))
}

func guardrailsTemplate(now time.Time) string {
	d := now.Format("2006-01-02")
	return fmt.Sprintf(`# Guardrails

Signs: lessons learned from failures. Read them before every iteration and add
a sign when a failure teaches something that the next agent must not repeat.

## Sign: Read Before Writing
- **Trigger**: Before changing any file
- **Instruction**: Read the file and the code that uses it first. Do not assume something is missing; confirm it by reading the code.
- **Added after**: Core principle (%s)

## Sign: Test Before Commit
- **Trigger**: Before committing
- **Instruction**: Run the quality gates and commit only when they pass.
- **Added after**: Core principle (%s)
`, d, d)
}

const errorsTemplate = "# Errors Log\n# [YYYY-MM-DD HH:MM:SS] message\n\n"

// activityTemplate starts activity.log. Both kinds of line are appended
// below it as they happen: "- ..." is an iteration's summary, "[time] ..."
// an event.
const activityTemplate = "# Activity Log\n\n## Run Summary\n" +
	"One line per iteration, starting with \"- \", appended among the events below as each iteration ends: " +
	"`grep '^- ' .ralph/activity.log` lists them.\n\n## Events\n\n"

// EnsureStateFiles creates each missing state file from its template and
// returns the paths it created. Existing files are left untouched.
func (w *Workspace) EnsureStateFiles(now time.Time) ([]string, error) {
	var created []string
	wrote, err := w.ensureIgnoreFile()
	if err != nil {
		return created, err
	}
	if wrote {
		created = append(created, w.Path(".gitignore"))
	}
	files := []struct {
		path, content string
	}{
		{w.ProgressPath(), progressTemplate(now)},
		{w.GuardrailsPath(), guardrailsTemplate(now)},
		{w.ErrorsLogPath(), errorsTemplate},
		{w.ActivityLogPath(), activityTemplate},
	}
	for _, f := range files {
		wrote, err := store.WriteIfMissing(f.path, []byte(f.content), 0o644)
		if err != nil {
			return created, err
		}
		if wrote {
			created = append(created, f.path)
		}
	}
	if err := os.MkdirAll(w.RunsDir(), 0o755); err != nil {
		return created, err
	}
	return created, nil
}

// EnsureIgnoreFile writes .ralph/.gitignore, or adds the lines it lacks,
// and nothing else: a command that writes one record of machine state
// (a queued hint) keeps it out of git without setting up the whole
// workspace.
func (w *Workspace) EnsureIgnoreFile() error {
	_, err := w.ensureIgnoreFile()
	return err
}

func (w *Workspace) ensureIgnoreFile() (bool, error) {
	wrote, err := store.WriteIfMissing(w.Path(".gitignore"), []byte(gitignore), 0o644)
	if err != nil {
		return false, err
	}
	// A workspace made by an older ralph gets the lines added since.
	for _, line := range strings.Split(strings.TrimSpace(gitignore), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			if err := w.Ignore(line); err != nil {
				return wrote, err
			}
		}
	}
	return wrote, nil
}

// PersonOwned reports whether rel (relative to the repository) is one of
// the files in .ralph that a person edits: configuration, guardrails and
// prompt overrides. ralph never commits a person's pending edits to them
// inside a task's commit.
func PersonOwned(rel string) bool {
	switch rel {
	case DirName + "/config.toml", DirName + "/guardrails.md":
		return true
	}
	return strings.HasPrefix(rel, DirName+"/prompts/")
}

// UserChanges returns the paths of dirty that are not ralph's own (outside
// .ralph/): the uncommitted work a fresh run or thread refuses to start
// on, since ralph's commits must hold only its own work.
func UserChanges(dirty []string) []string {
	var out []string
	for _, f := range dirty {
		if !strings.HasPrefix(f, DirName+"/") {
			out = append(out, f)
		}
	}
	return out
}

// Ignore adds line to .ralph/.gitignore unless it is there. The file must
// exist (EnsureStateFiles writes it): a .gitignore holding only this line
// would leave the rest of ralph's machine state unignored.
func (w *Workspace) Ignore(line string) error {
	p := w.Path(".gitignore")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		line = "\n" + line
	}
	return store.AppendFile(p, []byte(line+"\n"))
}

// Init creates config.toml holding configTemplate, and the state files.
// Nothing that exists is overwritten. The template comes from the caller
// (internal/app): the workspace holds the file, it does not know its
// contents.
func (w *Workspace) Init(now time.Time, configTemplate []byte) ([]string, error) {
	if err := os.MkdirAll(w.Dir(), 0o755); err != nil {
		return nil, err
	}
	var created []string
	wrote, err := store.WriteIfMissing(w.ConfigPath(), configTemplate, 0o644)
	if err != nil {
		return nil, err
	}
	if wrote {
		created = append(created, w.ConfigPath())
	}
	more, err := w.EnsureStateFiles(now)
	return append(created, more...), err
}

func stamp(t time.Time) string { return t.Format("2006-01-02 15:04:05") }

// LogError appends "[YYYY-MM-DD HH:MM:SS] message" to errors.log.
func (w *Workspace) LogError(now time.Time, msg string) error {
	return store.AppendFile(w.ErrorsLogPath(), []byte("["+stamp(now)+"] "+oneLine(msg)+"\n"))
}

// activityMu serialises this process's appends to activity.log (events
// and run-summary lines, from the loop and from goroutines that write
// records in the background), so that every line lands whole.
var activityMu sync.Mutex

// LogEvent appends "[YYYY-MM-DD HH:MM:SS] message" to activity.log.
func (w *Workspace) LogEvent(now time.Time, msg string) error {
	return w.appendActivity("[" + stamp(now) + "] " + oneLine(msg) + "\n")
}

// AddRunSummary appends "- line", an iteration's outcome, to activity.log.
// Summary lines land among the events in the order things happened, and
// `grep '^- ' .ralph/activity.log` lists them. They used to be inserted
// into the "## Run Summary" section, which meant reading and rewriting the
// whole log (two fsyncs) after every iteration, a cost that grew with the
// log, and a rewrite that replaced the file under a `tail -f`. An append
// costs one write and nothing rewrites a line once written (DESIGN §5:
// logs are append-only).
func (w *Workspace) AddRunSummary(line string) error {
	return w.appendActivity("- " + oneLine(line) + "\n")
}

// appendActivity appends one whole line to activity.log in one write. A
// log that is missing is made again from its template first; a .ralph/
// deleted under a run is not brought back piecemeal: the run stops and
// says so (Gone).
func (w *Workspace) appendActivity(line string) error {
	activityMu.Lock()
	defer activityMu.Unlock()
	p := w.ActivityLogPath()
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(w.Dir()); err != nil {
			return err
		}
		if _, err := store.WriteIfMissing(p, []byte(activityTemplate), 0o644); err != nil {
			return err
		}
	}
	return store.AppendFile(p, []byte(line))
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ⏎ ")), " ")
}
