package beads_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/beads/beadstest"
)

func client(t *testing.T, calls ...beadstest.Call) *beads.Client {
	return &beads.Client{Dir: t.TempDir(), Runner: beadstest.New(t, calls...), Actor: "ralph"}
}

func TestPayloadEnvelopeAndNoise(t *testing.T) {
	for in, want := range map[string]string{
		`{"schema_version":1,"data":[{"id":"a"}]}`: `[{"id":"a"}]`,
		"warning: x\n[1,2]":                        `[1,2]`,
		`{"id":"a","schema_version":1}`:            `{"id":"a","schema_version":1}`,
		"":                                         `null`,
	} {
		got, err := beads.Payload([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Payload(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := beads.Payload([]byte("not json")); err == nil {
		t.Error("Payload accepted text")
	}
}

func TestReadyArrayObjectEnvelopeAndMolecule(t *testing.T) {
	ctx := context.Background()
	c := client(t,
		beadstest.Call{Args: "ready --limit 1 --json", Stdout: `[{"id":"rl-1","title":"A","priority":1,"status":"open"}]`, Stderr: "Showing 1 of 3 ready issues"},
		beadstest.Call{Args: "ready --limit 1 --json", Stdout: `{"schema_version":1,"data":[{"id":"rl-2","title":"B","priority":"P3"}]}`},
		beadstest.Call{Args: "ready --limit 0 --mol rl-mol-x --json", Stdout: `{"molecule_id":"rl-mol-x","steps":[{"issue":{"id":"rl-mol-a"},"parallel_info":{"is_ready":true}},{"issue":{"id":"rl-mol-b"},"parallel_info":{"is_ready":false}}]}`},
		beadstest.Call{Args: "ready --limit 0 --json", Stdout: `[]`},
	)
	got, err := c.Ready(ctx, beads.ReadyOptions{Limit: 1})
	if err != nil || len(got) != 1 || got[0].ID != "rl-1" || got[0].Priority != 1 {
		t.Fatalf("plain: %+v %v", got, err)
	}
	got, err = c.Ready(ctx, beads.ReadyOptions{Limit: 1})
	if err != nil || len(got) != 1 || got[0].ID != "rl-2" || got[0].Priority != 3 {
		t.Fatalf("envelope: %+v %v", got, err)
	}
	got, err = c.Ready(ctx, beads.ReadyOptions{Mol: "rl-mol-x"})
	if err != nil || len(got) != 1 || got[0].ID != "rl-mol-a" {
		t.Fatalf("molecule: %+v %v", got, err)
	}
	got, err = c.Ready(ctx, beads.ReadyOptions{})
	if err != nil || len(got) != 0 {
		t.Fatalf("empty: %+v %v", got, err)
	}
}

func TestErrorOnStdout(t *testing.T) {
	c := client(t, beadstest.Call{Args: "show rl-zz --json", Stdout: `{"error":"no issues found matching the provided IDs","schema_version":1}`, Stderr: "Error: no issues found", Exit: 1})
	_, err := c.Show(context.Background(), "rl-zz")
	var be *beads.Error
	if !errors.As(err, &be) || be.ExitCode != 1 || be.Msg != "no issues found matching the provided IDs" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "bd show rl-zz --json (exit 1): no issues found") {
		t.Errorf("message: %v", err)
	}
}

func TestShowArrayAndObject(t *testing.T) {
	c := client(t,
		beadstest.Call{Args: "show rl-1 --json", Stdout: `[{"id":"rl-1","status":"blocked","dependencies":[{"id":"rl-0","dependency_type":"blocks"}]}]`},
		beadstest.Call{Args: "show rl-1 --json", Stdout: `{"id":"rl-1","status":"closed","schema_version":1}`},
	)
	is, err := c.Show(context.Background(), "rl-1")
	if err != nil || is.Status != "blocked" || is.Dependencies[0].Target() != "rl-0" || !is.Dependencies[0].Blocking() {
		t.Fatalf("%+v %v", is, err)
	}
	is, err = c.Show(context.Background(), "rl-1")
	if err != nil || is.Status != "closed" {
		t.Fatalf("%+v %v", is, err)
	}
}

func TestWritesAndMolecules(t *testing.T) {
	ctx := context.Background()
	c := client(t,
		beadstest.Call{Args: "update rl-1 --claim --json", Stdout: `[{"id":"rl-1","status":"in_progress"}]`},
		beadstest.Call{Args: "close rl-1 --reason done --json", Stdout: `[{"id":"rl-1","status":"closed"}]`},
		beadstest.Call{Args: "comments add rl-1 note --json", Stdout: `{"id":"u","issue_id":"rl-1","text":"note"}`},
		beadstest.Call{Args: "update rl-1 --status=blocked --json", Stdout: `[{"id":"rl-1"}]`},
		beadstest.Call{Args: "create --title found --type task --priority 2 --ephemeral --json", Stdout: `{"id":"rl-wisp-1","ephemeral":true,"schema_version":1}`},
		beadstest.Call{Args: "mol pour wf --json", Stdout: `{"created":3,"new_epic_id":"rl-mol-1","phase":"liquid","schema_version":1}`},
		beadstest.Call{Args: "mol progress rl-mol-1 --json", Stdout: `{"completed":1,"total":3,"percent":33.3,"molecule_id":"rl-mol-1"}`},
		beadstest.Call{Args: "mol burn rl-wisp-1 --force --json", Stdout: `{"deleted_count":1}`},
	)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Claim(ctx, "rl-1"))
	must(c.Close(ctx, "rl-1", "done"))
	must(c.Comment(ctx, "rl-1", "note"))
	must(c.SetStatus(ctx, "rl-1", beads.StatusBlocked))
	w, err := c.Create(ctx, beads.CreateOptions{Title: "found", Type: "task", Priority: 2, Ephemeral: true})
	if err != nil || w.ID != "rl-wisp-1" || !w.Ephemeral {
		t.Fatalf("%+v %v", w, err)
	}
	p, err := c.MolPour(ctx, "wf", nil)
	if err != nil || p.NewEpicID != "rl-mol-1" {
		t.Fatalf("%+v %v", p, err)
	}
	pr, err := c.MolProgress(ctx, "rl-mol-1")
	if err != nil || pr.Completed != 1 || pr.Total != 3 {
		t.Fatalf("%+v %v", pr, err)
	}
	must(c.MolBurn(ctx, "rl-wisp-1"))
}

func TestVersionAndDaemon(t *testing.T) {
	ctx := context.Background()
	c := client(t, beadstest.Call{Args: "version --json", Stdout: `{"branch":"master","build":"dev","schema_version":1,"version":"1.0.5"}`})
	v, note, err := c.Check(ctx)
	if err != nil || v.String() != "1.0.5" || !strings.Contains(note, "no daemon and needs none") {
		t.Fatalf("%v %q %v", v, note, err)
	}
	old := client(t,
		beadstest.Call{Args: "version --json", Stdout: "", Stderr: "unknown flag: --json", Exit: 1},
		beadstest.Call{Args: "version", Stdout: "bd version 0.49.1 (dev)\n"},
		beadstest.Call{Args: "daemon status", Stdout: "Daemon not running\n"},
	)
	v, note, err = old.Check(ctx)
	if !errors.Is(err, beads.ErrTooOld) || !strings.Contains(err.Error(), "scripts/install-bd.sh") {
		t.Fatalf("old bd: %v", err)
	}
	if !v.HasDaemon() || !strings.Contains(note, "daemon, which is not running") {
		t.Errorf("note %q for %v", note, v)
	}
}

func TestNotInstalled(t *testing.T) {
	c := &beads.Client{Dir: t.TempDir(), Runner: beads.ExecRunner{Bin: "/nonexistent/bd"}}
	_, _, err := c.Check(context.Background())
	if !errors.Is(err, beads.ErrNotInstalled) || !strings.Contains(err.Error(), "go install github.com/steveyegge/beads/cmd/bd@v1.0.5") {
		t.Fatalf("err = %v", err)
	}
}
