package crash

// The thread kill test: ralph is killed with SIGKILL at random instants
// (seeded) while it moves a quick-mode thread from its spec through the
// loop to review; after every kill each JSON document under .ralph must
// parse, `ralph thread show --json` must work, and the command the phase
// calls for must take the thread on, until it is committed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type threadShow struct {
	Phase struct {
		Type string `json:"type"`
	} `json:"phase"`
	Branch string `json:"branch"`
}

func (c *crashCase) ralph(t *testing.T, killAfter time.Duration, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.h.ralph, args...)
	cmd.Dir = c.repo
	cmd.Env = c.h.env(c.scenario, 0)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if killAfter > 0 {
		timer := time.AfterFunc(killAfter, func() { cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ralph %s did not end within 90s\n%s", strings.Join(args, " "), out.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return out.String(), true
		}
	}
	return out.String(), false
}

// allJSONParses checks every .json document under .ralph.
func (c *crashCase) allJSONParses(t *testing.T) {
	t.Helper()
	filepath.WalkDir(filepath.Join(c.repo, ".ralph"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if !json.Valid(b) {
			t.Fatalf("%s does not parse after a kill:\n%s", p, b)
		}
		return nil
	})
}

func (c *crashCase) show(t *testing.T) threadShow {
	t.Helper()
	out, killed := c.ralph(t, 0, "thread", "show", "--json")
	var s threadShow
	if killed || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("thread show --json after a kill:\n%s", out)
	}
	return s
}

// next is the command that takes the thread on from its phase.
func nextThreadCommand(phase string) []string {
	switch phase {
	case "Drafting":
		return []string{"thread", "finalize"}
	case "Finalized", "Configuring":
		return []string{"thread", "start"}
	case "Preflight", "Running", "Verifying", "Paused":
		return []string{"thread", "resume"}
	case "Implemented":
		return []string{"thread", "review"}
	}
	return nil
}

func TestThreadKilledAtRandomTimes(t *testing.T) {
	h := newCrashHarness(t)
	// Without the race runtime's exit sleep a command often ends before
	// its random kill (up to 1.5s) comes, so a seed lands 2 to 4 kills,
	// all in ralph's work; seeds 7 and 8 keep the total above the 24 the
	// slower runs landed.
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		t.Run("seed"+string(rune('0'+seed)), func(t *testing.T) {
			// Each seed kills its own repository's thread, one command
			// after another; the seeds need not wait for each other.
			t.Parallel()
			rng := rand.New(rand.NewSource(seed))
			c := h.newCase(t, true)
			spec := filepath.Join(t.TempDir(), "spec.md")
			if err := os.WriteFile(spec, []byte(crashPRD+"\nPromise: COMPLETE\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, _ := c.ralph(t, 0, "thread", "new", "--quick", "--id", "k1", "Crash thread"); !strings.Contains(out, "created") {
				t.Fatalf("thread new: %s", out)
			}
			if out, _ := c.ralph(t, 0, "thread", "spec", spec); !strings.Contains(out, "draft of thread k1") {
				t.Fatalf("thread spec: %s", out)
			}
			kills := 0
			args := []string{"thread", "finalize"}
			var log []string
			for step := 0; step < 30; step++ {
				var kill time.Duration
				if kills < 4 {
					kill = time.Duration(rng.Intn(1500)+1) * time.Millisecond
				}
				out, killed := c.ralph(t, kill, args...)
				log = append(log, strings.Join(args, " ")+func() string {
					if killed {
						return " (killed after " + kill.String() + ")"
					}
					return ""
				}())
				if killed {
					kills++
					c.reapLeftovers(t)
				}
				c.allJSONParses(t)
				s := c.show(t)
				if s.Phase.Type == "PendingReview" {
					break
				}
				if s.Phase.Type == "Stuck" || s.Phase.Type == "PreflightFailed" || s.Phase.Type == "Abandoned" {
					t.Fatalf("thread ended in %s after %v\n%s", s.Phase.Type, log, out)
				}
				args = nextThreadCommand(s.Phase.Type)
				if args == nil {
					t.Fatalf("no command for phase %s after %v", s.Phase.Type, log)
				}
			}
			if s := c.show(t); s.Phase.Type != "PendingReview" {
				t.Fatalf("thread did not reach review: %s after %v", s.Phase.Type, log)
			}
			if kills == 0 {
				// Every command ended before its kill came: the seed
				// crashed nothing, and passing would say it had.
				t.Fatalf("seed %d landed no kill: nothing was tested after %v", seed, log)
			}
			for _, a := range [][]string{{"thread", "approve"}, {"thread", "commit"}} {
				if out, killed := c.ralph(t, 0, a...); killed || strings.Contains(out, "ralph: ") {
					t.Fatalf("%v: %s", a, out)
				}
			}
			if s := c.show(t); s.Phase.Type != "Done" || s.Branch != "ralph/k1" {
				t.Fatalf("want Done on ralph/k1, got %+v after %v", s, log)
			}
			for _, f := range []string{"one.txt", "two.txt", "three.txt"} {
				if _, err := os.Stat(filepath.Join(c.repo, f)); err != nil {
					t.Errorf("%s missing after %v", f, log)
				}
			}
			t.Logf("seed %d: %d kill(s): %v", seed, kills, log)
		})
	}
}
