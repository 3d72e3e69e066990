// Package gitx reads and records repository state by running the git binary.
//
// Shelling out keeps ralph's view identical to what the user and the agent
// see with git itself (config, hooks, attributes). Because the loop runs git
// on every iteration, each method uses as few git processes as it can:
// Snapshot and Range use exactly one, CommitSnapshot two.
package gitx

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotRepo reports that a directory is not inside a git work tree.
var ErrNotRepo = errors.New("not a git repository (run `git init` first)")

// ErrNothingToCommit reports that Commit found no staged changes.
var ErrNothingToCommit = errors.New("nothing to commit")

// Runner runs one git command in dir and returns its standard output. On a
// non-zero exit it returns an error naming the command and including its
// standard error. Tests may replace it.
type Runner interface {
	Git(ctx context.Context, dir string, args ...string) ([]byte, error)
}

// StdinRunner is a Runner that can also feed standard input to git. Commit
// uses it to pass the message with -F -, keeping the message off the command
// line; with a Runner lacking it, Commit passes the message in a temporary
// file instead.
type StdinRunner interface {
	Runner
	GitStdin(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error)
}

// ExitError is the error the default Runner returns when git runs and exits
// non-zero.
type ExitError struct {
	// Args are the git arguments, without "git" and "-C dir".
	Args []string
	// ExitCode is git's exit status.
	ExitCode int
	// Stderr is git's trimmed standard error, or its standard output when
	// standard error was empty (git prints some refusals there).
	Stderr string
}

// Error returns "git <args>: exit status N: <stderr>".
func (e *ExitError) Error() string {
	msg := fmt.Sprintf("git %s: exit status %d", strings.Join(e.Args, " "), e.ExitCode)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// ExecRunner is the default Runner: it runs the git found in PATH with
// "-C dir", LC_ALL=C (so messages can be matched) and GIT_TERMINAL_PROMPT=0
// (so git never waits for a password nobody will type).
type ExecRunner struct{}

var _ StdinRunner = ExecRunner{}

// Git runs git with args in dir and returns its standard output.
func (ExecRunner) Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return ExecRunner{}.GitStdin(ctx, dir, nil, args...)
}

// GitStdin is Git with stdin as git's standard input; nil means empty.
func (ExecRunner) GitStdin(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	return ExecRunner{}.GitEnv(ctx, dir, nil, stdin, args...)
}

// EnvRunner is a StdinRunner that can also add variables to git's
// environment. SetAside needs it to build a commit in an index of its own
// (GIT_INDEX_FILE), leaving the repository's index alone.
type EnvRunner interface {
	StdinRunner
	GitEnv(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error)
}

var _ EnvRunner = ExecRunner{}

// GitEnv is GitStdin with env (NAME=value) added to git's environment.
func (ExecRunner) GitEnv(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(gitEnv(), env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Hooks run by commit may leave processes holding the pipes; git's own
	// exit must still end the call.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success():
		return stdout.Bytes(), nil
	case errors.As(err, &exitErr) && exitErr.Exited():
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.Bytes(), &ExitError{Args: args, ExitCode: exitErr.ExitCode(), Stderr: msg}
	default:
		return stdout.Bytes(), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
}

// gitEnv is the parent environment minus the variables that would make git
// ignore -C dir, plus the fixed settings ExecRunner documents.
func gitEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
			"GIT_OBJECT_DIRECTORY", "GIT_PREFIX", "LC_ALL", "GIT_TERMINAL_PROMPT":
			return true
		}
		return false
	})
	return append(env, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0")
}

// Repo is a git work tree.
type Repo struct {
	// Dir is the work tree's top level after Open; paths in results are
	// relative to it.
	Dir string
	// Runner runs every git command of the Repo; Open sets ExecRunner.
	Runner Runner
}

// Open returns the repository containing dir, with Dir set to its top level.
// A directory outside any work tree yields an error matching ErrNotRepo.
func Open(ctx context.Context, dir string) (*Repo, error) {
	runner := ExecRunner{}
	out, err := runner.Git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && strings.Contains(ee.Stderr, "not a git repository") {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotRepo)
		}
		return nil, err
	}
	top := strings.TrimSuffix(string(out), "\n")
	if top == "" {
		// A bare repository or the inside of .git has no work tree.
		return nil, fmt.Errorf("%s: %w", dir, ErrNotRepo)
	}
	return &Repo{Dir: top, Runner: runner}, nil
}

func (r *Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	return r.Runner.Git(ctx, r.Dir, args...)
}

// Snapshot is the state of a work tree at one moment.
type Snapshot struct {
	// Head is the commit hash HEAD points at, "" when there are no commits.
	Head string
	// Branch is the checked-out branch name, "" when HEAD is detached.
	Branch string
	// Dirty lists the repo-relative paths with staged, unstaged or
	// untracked changes, sorted and without duplicates. Both sides of a
	// rename are listed. Ignored files are not.
	Dirty []string
	// Unmerged lists the paths with merge conflicts, sorted.
	Unmerged []string
	// Added lists the paths the index adds that HEAD does not have (a
	// `git add` of a new file that was never committed), sorted.
	Added []string
	// Nested lists the dirty paths that are repositories of their own, a
	// submodule or an untracked folder holding a repository ("nest/"),
	// sorted: git add takes in what moved their HEAD, never what changed
	// inside them, so they stay dirty after any commit.
	Nested []string
}

// Clean reports whether the work tree has no changes.
func (s Snapshot) Clean() bool { return len(s.Dirty) == 0 }

// Snapshot reads HEAD, the branch and the dirty paths with exactly one git
// process.
func (r *Repo) Snapshot(ctx context.Context) (Snapshot, error) {
	out, err := r.git(ctx, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all")
	if err != nil {
		return Snapshot{}, err
	}
	return parseStatus(out)
}

// statusFields is the number of space-separated fields, path included, of
// each porcelain v2 entry type: ordinary, renamed or copied, unmerged,
// untracked and ignored.
var statusFields = map[byte]int{'1': 9, '2': 10, 'u': 11, '?': 2, '!': 2}

// parseStatus parses `git status --porcelain=v2 --branch -z` output.
func parseStatus(out []byte) (Snapshot, error) {
	var s Snapshot
	origNext := false // the previous entry was a rename or copy
	for rec := range strings.SplitSeq(string(out), "\x00") {
		switch {
		case origNext:
			// The original path of a rename or copy is its own record.
			s.Dirty = append(s.Dirty, rec)
			origNext = false
			continue
		case rec == "":
			continue
		case rec[0] == '#':
			if v, ok := strings.CutPrefix(rec, "# branch.oid "); ok && v != "(initial)" {
				s.Head = v
			} else if v, ok := strings.CutPrefix(rec, "# branch.head "); ok && v != "(detached)" {
				s.Branch = v
			}
			continue
		}
		// Entries have a fixed number of space-separated fields before the
		// path; the path itself may contain spaces.
		n, ok := statusFields[rec[0]]
		if !ok {
			return Snapshot{}, fmt.Errorf("gitx: unexpected status record %q", rec)
		}
		fields := strings.SplitN(rec, " ", n)
		if len(fields) != n {
			return Snapshot{}, fmt.Errorf("gitx: malformed status record %q", rec)
		}
		s.Dirty = append(s.Dirty, fields[n-1])
		// The third field of a changed entry is its submodule state,
		// "N..." for anything else; git lists an untracked repository
		// as its folder, never its files.
		if (rec[0] != '?' && rec[0] != '!' && strings.HasPrefix(fields[2], "S")) || (rec[0] == '?' && strings.HasSuffix(fields[1], "/")) {
			s.Nested = append(s.Nested, fields[n-1])
		}
		if rec[0] == '1' && strings.HasPrefix(fields[1], "A") {
			s.Added = append(s.Added, fields[n-1])
		}
		if rec[0] == 'u' {
			s.Unmerged = append(s.Unmerged, fields[n-1])
		}
		origNext = rec[0] == '2'
	}
	slices.Sort(s.Unmerged)
	slices.Sort(s.Added)
	slices.Sort(s.Nested)
	slices.Sort(s.Dirty)
	s.Dirty = slices.Compact(s.Dirty)
	return s, nil
}

// Commit is one commit in history.
type Commit struct {
	// Hash is the full commit hash.
	Hash string `json:"hash"`
	// Subject is the first line of the commit message.
	Subject string `json:"subject"`
}

// CommitsBetween returns the commits reachable from to but not from from,
// oldest first. An empty from means every commit reachable from to; from ==
// to returns nil without running git.
func (r *Repo) CommitsBetween(ctx context.Context, from, to string) ([]Commit, error) {
	if from == to {
		return nil, nil
	}
	if err := checkRevs(from, to); err != nil {
		return nil, err
	}
	rng := to
	if from != "" {
		rng = from + ".." + to
	}
	// %s is one line by construction, so a newline ends each record; the
	// hash has no spaces, so the first space ends the hash.
	out, err := r.git(ctx, "log", "--reverse", "--no-show-signature", "--format=%H %s", rng, "--")
	if err != nil {
		return nil, err
	}
	var commits []Commit
	for line := range strings.Lines(string(out)) {
		hash, subject, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		commits = append(commits, Commit{Hash: hash, Subject: subject})
	}
	return commits, nil
}

// ChangedFiles returns the sorted paths that differ between the trees of two
// commits. An empty from means since the root, that is every file in to;
// from == to returns nil without running git. A rename lists both paths.
func (r *Repo) ChangedFiles(ctx context.Context, from, to string) ([]string, error) {
	if from == to {
		return nil, nil
	}
	if err := checkRevs(from, to); err != nil {
		return nil, err
	}
	var args []string
	if from == "" {
		// Equivalent to a diff against the empty tree, without depending
		// on the repository's hash algorithm for that tree's id.
		args = []string{"ls-tree", "-r", "--name-only", "-z", to}
	} else {
		args = []string{"diff-tree", "-r", "--name-only", "-z", "--no-renames", from, to}
	}
	return r.paths(ctx, args...)
}

// Range is what lies between two commits, read with one git process: what
// CommitsBetween, ChangedFiles and IsAncestor tell with three.
type Range struct {
	// Commits are the commits reachable from to but not from from,
	// oldest first.
	Commits []Commit
	// Files are the sorted paths those commits changed, each against its
	// first parent; a merge's own changes are not listed (as `git log
	// --name-only` shows them), the commits it brings in are.
	Files []string
	// Descends says that to descends from from: history was added to,
	// not rewritten.
	Descends bool
}

// Range reads the commits between from and to, the files they changed and
// whether to descends from from, with one `git log --boundary`: from is an
// ancestor of to exactly when it is one of the walk's boundary commits,
// the excluded parents of the commits shown. from must be a full hash (as
// Snapshot gives it) or "" (every commit reachable from to); from == to
// returns a Range that descends without running git.
func (r *Repo) Range(ctx context.Context, from, to string) (Range, error) {
	if from == to {
		return Range{Descends: true}, nil
	}
	if err := checkRevs(from, to); err != nil {
		return Range{}, err
	}
	// Each commit starts with an empty record (the format's leading NUL
	// after the NUL that ends the previous file): a path is never empty,
	// so the header that follows cannot be mistaken for one.
	args := []string{"log", "--no-show-signature", "--name-only", "--no-renames", "-z", "--format=%x00%m%H %s"}
	if from != "" {
		args = append(args, "--boundary", from+".."+to)
	} else {
		args = append(args, to)
	}
	out, err := r.git(ctx, append(args, "--")...)
	if err != nil {
		return Range{}, err
	}
	return parseRange(out, from), nil
}

// parseRange parses Range's log output, newest commit first.
func parseRange(out []byte, from string) Range {
	rg := Range{Descends: from == ""}
	var commits []Commit
	header, boundary, first := false, false, false
	for rec := range strings.SplitSeq(string(out), "\x00") {
		switch {
		case rec == "":
			header = true
			continue
		case header:
			header, first = false, true
			// %m is '>' for a commit of the range, '-' for a boundary.
			hash, subject, _ := strings.Cut(rec[1:], " ")
			boundary = rec[0] == '-'
			if boundary {
				rg.Descends = rg.Descends || hash == from
			} else {
				commits = append(commits, Commit{Hash: hash, Subject: subject})
			}
			continue
		}
		if first {
			// git puts one newline between a commit's header and its
			// first path.
			rec, first = strings.TrimPrefix(rec, "\n"), false
		}
		if !boundary && rec != "" {
			rg.Files = append(rg.Files, rec)
		}
	}
	slices.Reverse(commits)
	rg.Commits = commits
	slices.Sort(rg.Files)
	rg.Files = slices.Compact(rg.Files)
	return rg
}

// paths runs a git command that prints NUL-separated paths (-z) and
// returns them sorted, without duplicates.
func (r *Repo) paths(ctx context.Context, args ...string) ([]string, error) {
	out, err := r.git(ctx, args...)
	if err != nil {
		return nil, err
	}
	var files []string
	for f := range strings.SplitSeq(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// checkRevs rejects revisions git would parse as options, and a missing to.
func checkRevs(from, to string) error {
	if to == "" {
		return errors.New("gitx: empty to revision")
	}
	if strings.HasPrefix(from, "-") || strings.HasPrefix(to, "-") {
		return fmt.Errorf("gitx: invalid revision %q..%q", from, to)
	}
	return nil
}

// Head returns the hash HEAD points at, or "" when there are no commits.
func (r *Repo) Head(ctx context.Context) (string, error) {
	// --ignore-missing turns an unborn HEAD into empty output instead of an
	// error, so no exit status needs interpreting.
	out, err := r.git(ctx, "rev-list", "-n", "1", "--ignore-missing", "HEAD", "--")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// AddAll stages every change in the work tree: new, modified and deleted
// files, honouring .gitignore.
func (r *Repo) AddAll(ctx context.Context) error {
	_, err := r.git(ctx, "add", "--all")
	return err
}

// noMaintenance goes before every commit ralph makes: a commit otherwise
// starts `git maintenance run --auto` (a process per commit, and now and
// then a repack or gc while the next agent waits). Maintenance is the
// user's to schedule (`git maintenance start`), and their own commits
// still run it.
var noMaintenance = []string{"-c", "maintenance.auto=false"}

// Commit records the staged changes as a new commit with message and returns
// its hash. Hooks always run (never --no-verify) and it never amends. With no
// staged changes it returns an error matching ErrNothingToCommit.
func (r *Repo) Commit(ctx context.Context, message string) (string, error) {
	if err := r.commit(ctx, message); err != nil {
		return "", err
	}
	out, err := r.git(ctx, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// CommitSnapshot is Commit followed by a Snapshot, whose Head is the new
// commit: two git processes where Commit and a Snapshot after it take
// three, for a caller that reads the tree after its commit anyway.
func (r *Repo) CommitSnapshot(ctx context.Context, message string) (Snapshot, error) {
	if err := r.commit(ctx, message); err != nil {
		return Snapshot{}, err
	}
	return r.Snapshot(ctx)
}

// commit runs git commit with message, maintenance off, and says when
// there was nothing to commit.
func (r *Repo) commit(ctx context.Context, message string) error {
	var err error
	if sr, ok := r.Runner.(StdinRunner); ok {
		_, err = sr.GitStdin(ctx, r.Dir, strings.NewReader(message), slices.Concat(noMaintenance, []string{"commit", "-q", "-F", "-"})...,
		)
	} else {
		err = r.commitViaFile(ctx, message)
	}
	return nothingToCommit(err)
}

// nothingToCommit wraps a commit's error in ErrNothingToCommit when git
// refused it for want of changes.
func nothingToCommit(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) && (strings.Contains(ee.Stderr, "nothing to commit") ||
		strings.Contains(ee.Stderr, "no changes added to commit") || strings.Contains(ee.Stderr, "nothing added to commit")) {
		return fmt.Errorf("%w: %w", ErrNothingToCommit, err)
	}
	return err
}

func (r *Repo) commitViaFile(ctx context.Context, message string) error {
	f, err := os.CreateTemp("", "ralph-commit-msg-*")
	if err != nil {
		return fmt.Errorf("gitx: commit message file: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(message)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("gitx: commit message file: %w", err)
	}
	_, err = r.git(ctx, slices.Concat(noMaintenance, []string{"commit", "-q", "-F", f.Name()})...,
	)
	return err
}

// Diff returns the changes of the work tree against from, untracked files
// included (they are marked intent-to-add in the index so that git diff
// shows them), cut to limit bytes. With stat only the diffstat is returned.
func (r *Repo) Diff(ctx context.Context, from string, stat bool, limit int) (string, error) {
	if strings.HasPrefix(from, "-") {
		return "", fmt.Errorf("gitx: invalid revision %q", from)
	}
	if _, err := r.git(ctx, "add", "--all", "--intent-to-add"); err != nil {
		return "", err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff"}
	if stat {
		args = append(args, "--stat")
	}
	if from != "" {
		args = append(args, from)
	}
	out, err := r.git(ctx, append(args, "--")...)
	if err != nil {
		return "", err
	}
	if limit > 0 && len(out) > limit {
		return string(out[:limit]) + "\n… (diff cut at " + strconv.Itoa(limit) + " bytes)\n", nil
	}
	return string(out), nil
}

// LastCommit returns the hash and full message of HEAD.
func (r *Repo) LastCommit(ctx context.Context) (hash, message string, err error) {
	out, err := r.git(ctx, "log", "-1", "--format=%H%n%B")
	if err != nil {
		return "", "", err
	}
	hash, message, _ = strings.Cut(string(out), "\n")
	return strings.TrimSpace(hash), message, nil
}

// SetAside keeps the work tree's changes outside the excluded paths
// (untracked files included, ignored ones never) in a commit whose parent
// is HEAD, stores it at ref, and then puts the files it holds back as they
// are at HEAD. It returns the commit, or "" and no error when there was
// nothing to set aside (ref is then left alone).
//
// Unlike git stash it uses no ref that every worktree of the repository
// shares (refs/stash), so two runs in two worktrees never take each other's
// work, and a user's own stash is never touched. The commit is built in an
// index of its own; the repository's index changes only for the files put
// back.
func (r *Repo) SetAside(ctx context.Context, ref, message string, exclude ...string) (string, error) {
	er, ok := r.Runner.(EnvRunner)
	if !ok {
		return "", errors.New("gitx: SetAside needs a Runner that can set git's environment (an EnvRunner)")
	}
	if !strings.HasPrefix(ref, "refs/") {
		return "", fmt.Errorf("gitx: set aside: %q is not a full ref name (refs/...)", ref)
	}
	head, err := r.git(ctx, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("set aside: the work has no commit to set it aside from: %w", err)
	}
	parent := strings.TrimSpace(string(head))
	// The temporary index lives in this worktree's git folder: a temp
	// folder inside the work tree (TMPDIR can point there) would be swept
	// into the set-aside commit and deleted from under whoever uses it.
	gitDir, err := r.git(ctx, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(strings.TrimSpace(string(gitDir)), "ralph-set-aside-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	git := func(args ...string) (string, error) {
		out, err := er.GitEnv(ctx, r.Dir, env, nil, args...)
		return strings.TrimSpace(string(out)), err
	}
	spec := []string{"--", "."}
	for _, p := range exclude {
		spec = append(spec, ":(exclude)"+p)
	}
	if _, err := git("read-tree", parent); err != nil {
		return "", err
	}
	if _, err := git(append([]string{"add", "-A"}, spec...)...); err != nil {
		return "", err
	}
	tree, err := git("write-tree")
	if err != nil {
		return "", err
	}
	headTree, err := git("rev-parse", parent+"^{tree}")
	if err != nil || tree == headTree {
		return "", err
	}
	commit, err := git("commit-tree", tree, "-p", parent, "-m", message)
	if err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "update-ref", "-m", message, ref, commit); err != nil {
		return "", err
	}
	return commit, r.restoreFrom(ctx, parent, commit)
}

// restoreFrom puts the files that differ between the commits head and
// aside back as they are at head: changed and deleted files are checked
// out from it, and files head does not have are removed from the index
// and the work tree. Nothing else is touched.
func (r *Repo) restoreFrom(ctx context.Context, head, aside string) error {
	out, err := r.git(ctx, "diff-tree", "-r", "--no-renames", "--name-status", "-z", head, aside)
	if err != nil {
		return err
	}
	var back, added []string
	fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "A" {
			added = append(added, fields[i+1])
		} else {
			back = append(back, fields[i+1])
		}
	}
	sr, ok := r.Runner.(StdinRunner)
	if !ok {
		return errors.New("gitx: SetAside needs a Runner that can feed git's standard input")
	}
	paths := func(list []string) io.Reader { return strings.NewReader(strings.Join(list, "\x00")) }
	if len(back) > 0 {
		if _, err := sr.GitStdin(ctx, r.Dir, paths(back), "--literal-pathspecs", "checkout", head, "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return err
		}
	}
	if len(added) > 0 {
		if _, err := sr.GitStdin(ctx, r.Dir, paths(added), "--literal-pathspecs", "rm", "-q", "--cached", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return err
		}
	}
	for _, p := range added {
		abs := filepath.Join(r.Dir, filepath.FromSlash(p))
		if err := os.Remove(abs); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// Folders the attempt made go with their last file, as a stash
		// would take them; a folder that holds anything else stays.
		for dir := filepath.Dir(abs); dir != r.Dir && strings.HasPrefix(dir, r.Dir); dir = filepath.Dir(dir) {
			if os.Remove(dir) != nil {
				break
			}
		}
	}
	return nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to)
// commit b.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	if err := checkRevs(a, b); err != nil {
		return false, err
	}
	_, err := r.git(ctx, "merge-base", "--is-ancestor", a, b)
	var ee *ExitError
	if errors.As(err, &ee) && ee.ExitCode == 1 {
		return false, nil
	}
	return err == nil, err
}

// CommitTrailer is the trailer that marks a commit as made by ralph itself.
// Its value is a fresh token that ralph keeps in its own state and writes
// only at the moment it commits, so an agent cannot copy it from a prompt.
const CommitTrailer = "Ralph-Commit"

// NewCommitToken returns a fresh random value for CommitTrailer.
func NewCommitToken() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("gitx: no randomness: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// HasCommitToken reports whether a commit message carries token as its
// CommitTrailer line.
func HasCommitToken(message, token string) bool {
	if token == "" {
		return false
	}
	for line := range strings.Lines(message) {
		if strings.TrimSpace(line) == CommitTrailer+": "+token {
			return true
		}
	}
	return false
}

// Untracked returns the untracked, not ignored files under pathspecs,
// sorted.
func (r *Repo) Untracked(ctx context.Context, pathspecs ...string) ([]string, error) {
	return r.paths(ctx, append([]string{"ls-files", "--others", "--exclude-standard", "-z", "--"}, pathspecs...)...)
}

// CommitPaths commits the work tree's content of exactly these paths (new
// files included), whatever else is staged or changed, and returns the new
// commit's hash. Hooks run.
func (r *Repo) CommitPaths(ctx context.Context, message string, paths ...string) (string, error) {
	if len(paths) == 0 {
		return "", ErrNothingToCommit
	}
	if _, err := r.git(ctx, append([]string{"add", "--"}, paths...)...); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, slices.Concat(noMaintenance, []string{"commit", "-q", "-m", message, "--"}, paths)...,
	); err != nil {
		return "", err
	}
	return r.Head(ctx)
}
