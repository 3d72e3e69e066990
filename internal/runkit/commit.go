package runkit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// CommitGit is the part of git a commit needs; *gitx.Repo has it, and the
// runners' git ports do.
type CommitGit interface {
	AddAll(ctx context.Context) error
	Commit(ctx context.Context, message string) (string, error)
	CommitReader
}

// CommitReader reads the last commit of a branch or work tree: what
// Committed looks at.
type CommitReader interface {
	LastCommit(ctx context.Context) (hash, message string, err error)
}

// Trailer is one "Key: Value" line at the end of a commit message that
// ties the commit to ralph's records (Ralph-Task, Ralph-Run, ...).
type Trailer struct{ Key, Value string }

// Message is a commit message ralph writes.
type Message struct {
	Subject string
	// Body comes between the subject and the trailers; "" for none.
	Body     string
	Trailers []Trailer
	// Token is the Ralph-Commit token when the runner made one before
	// (and may have saved it already); "" makes a fresh one. Either way
	// save gets it before the commit is made.
	Token string
}

// Text returns the message with token as its Ralph-Commit trailer, the
// last line; "" leaves it out.
func (m Message) Text(token string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(m.Subject) + "\n\n")
	if body := strings.TrimSpace(m.Body); body != "" {
		b.WriteString(body + "\n\n")
	}
	for _, t := range m.Trailers {
		fmt.Fprintf(&b, "%s: %s\n", t.Key, t.Value)
	}
	if token != "" {
		fmt.Fprintf(&b, "%s: %s\n", gitx.CommitTrailer, token)
	}
	return b.String()
}

// Committed reports whether HEAD is the commit ralph made with token
// before a crash. Only the token proves it: the task and run trailers are
// in the agent's prompt, and an agent that copies them into its own commit
// must not have that commit taken for ralph's.
func Committed(ctx context.Context, g CommitReader, token string) (string, bool) {
	if token == "" {
		return "", false
	}
	hash, msg, err := g.LastCommit(ctx)
	if err != nil || !gitx.HasCommitToken(msg, token) {
		return "", false
	}
	return hash, true
}

// Commit stages every change and commits it with m. A fresh token goes to
// save before the commit is made, so that a crash between the commit and
// the runner's own record of it is recognised by Committed on the next
// start, and the work is never committed twice. Hooks run; a commit they
// refuse returns their error with the index left staged for the caller to
// undo. Nothing staged returns an error matching gitx.ErrNothingToCommit.
func Commit(ctx context.Context, g CommitGit, m Message, save func(token string) error) (string, error) {
	text, err := stage(ctx, g, m, save)
	if err != nil {
		return "", err
	}
	return g.Commit(ctx, text)
}

// ListingGit is a runner's Git that can also read the work tree right
// after its commit and whose staging names the paths it staged
// (*gitx.Repo's AddAllListed).
type ListingGit interface {
	Git
	CommitSnapshot(ctx context.Context, message string) (gitx.Snapshot, error)
	AddAllListed(ctx context.Context) ([]string, error)
	// CommitAlone commits and says whether git ran no other program on
	// the way (gitx.Repo.CommitAlone).
	CommitAlone(ctx context.Context, message, trace string) (alone bool, err error)
	// HeadFiles reads HEAD and the branch from git's files (gitx.ReadHead).
	HeadFiles() (head, branch string, ok bool)
}

// CommitListed is CommitSnapshot that also returns the paths the staging
// took in, new, changed or removed: a runner that knows the tree from
// before the checks learns what they and ralph changed since without
// another git status. staged is set even when the commit then fails.
//
// With trace set (an absolute path outside the work tree, for git's
// trace: gitx.Repo.CommitAlone) it takes no status after the commit
// either when git says it ran no hook or other program on the way: the
// staging took in every change, so the tree after is the commit with
// nothing dirty, read from git's files. A staged path that is a
// repository of its own (an embedded repository, "nest/"), whose inner
// changes no staging takes in, and HEAD that only git can read still get
// the status. A caller whose tree already holds such a repository (a
// submodule: gitx.Snapshot.Nested) passes "": always the status.
func CommitListed(ctx context.Context, g ListingGit, m Message, save func(token string) error, trace string) (after gitx.Snapshot, staged []string, err error) {
	text, err := stageWith(ctx, func(ctx context.Context) (err error) {
		staged, err = g.AddAllListed(ctx)
		return err
	}, m, save)
	if err != nil {
		return gitx.Snapshot{}, staged, err
	}
	if trace == "" {
		after, err = g.CommitSnapshot(ctx, text)
		return after, staged, err
	}
	alone, err := g.CommitAlone(ctx, text, trace)
	if err != nil {
		return gitx.Snapshot{}, staged, err
	}
	nested := slices.ContainsFunc(staged, func(p string) bool { return strings.HasSuffix(p, "/") })
	if alone && !nested {
		if head, branch, ok := g.HeadFiles(); ok && head != "" {
			return gitx.Snapshot{Head: head, Branch: branch}, staged, nil
		}
	}
	after, err = g.Snapshot(ctx)
	return after, staged, err
}

// stage stages every change, saves a fresh token and returns the message
// that carries it.
func stage(ctx context.Context, g CommitGit, m Message, save func(token string) error) (string, error) {
	return stageWith(ctx, g.AddAll, m, save)
}

// stageWith is stage with add as the staging.
func stageWith(ctx context.Context, add func(context.Context) error, m Message, save func(token string) error) (string, error) {
	if err := add(ctx); err != nil {
		return "", fmt.Errorf("git add: %w", err)
	}
	token := m.Token
	if token == "" {
		token = gitx.NewCommitToken()
	}
	if save != nil {
		if err := save(token); err != nil {
			return "", err
		}
	}
	return m.Text(token), nil
}
