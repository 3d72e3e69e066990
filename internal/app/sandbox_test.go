package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/sandbox"
)

// The sandbox hides ~/.gitconfig, so the policy carries the commit
// identity git outside would use, in git's order: the variable, then
// author.* or committer.*, then user.*; and nothing else of the config.
func TestSandboxCarriesTheCommitIdentity(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: install bubblewrap (apt-get install bubblewrap)")
	}
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(t.TempDir(), "gitconfig"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := repo(t)
	for _, kv := range [][2]string{{"user.name", "User"}, {"user.email", "user@example.org"}, {"author.name", "Author"}, {"credential.helper", "store"}} {
		if out, err := exec.Command("git", "-C", dir, "config", kv[0], kv[1]).CombinedOutput(); err != nil {
			t.Fatalf("git config: %v\n%s", err, out)
		}
	}
	getenv := func(name string) string {
		switch name {
		case "GIT_COMMITTER_EMAIL":
			return "env@example.org"
		case "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME":
			return "" // whatever the environment running the tests says
		}
		return os.Getenv(name)
	}
	a, err := app.Open(context.Background(), dir, getenv, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := a.Sandbox(context.Background(), sandbox.Bwrap)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GIT_AUTHOR_NAME=Author", "GIT_AUTHOR_EMAIL=user@example.org", "GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=env@example.org"}
	if !slices.Equal(p.Set, want) {
		t.Errorf("the policy sets %q, want %q", p.Set, want)
	}
}
