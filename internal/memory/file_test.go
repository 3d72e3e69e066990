package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFileStoreQueriesAndLinks(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "memory.jsonl")
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := &FileStore{Path: p}
	f.Add(ctx, Node{Name: "Brooks principles", MemoryType: TypeAgentContext, Date: base})
	f.Add(ctx, Node{Name: "unrelated", MemoryType: TypeLesson, Date: base})
	for i := 0; i < 12; i++ {
		f.Add(ctx, Node{Name: fmt.Sprintf("issue %d", i), MemoryType: []string{TypeBlocker, TypeBug, TypeTechnicalDebt}[i%3], Date: base.Add(time.Duration(i) * time.Hour)})
	}
	id, _ := f.Add(ctx, Node{Name: "US-001 done", MemoryType: TypeEvent, Date: base})
	if err := f.Link(ctx, id, "commit", "abc123"); err != nil {
		t.Fatal(err)
	}
	agentCtx, issues, err := Load(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(agentCtx) != 1 || agentCtx[0].Name != "Brooks principles" {
		t.Fatalf("agent context = %+v", agentCtx)
	}
	if len(issues) != 10 || issues[0].Name != "issue 11" || issues[9].Name != "issue 2" {
		t.Fatalf("issues: %d, first %q, last %q", len(issues), issues[0].Name, issues[len(issues)-1].Name)
	}
	all, _ := f.all()
	for _, n := range all {
		if n.ID == id && n.Props["commit"] != "abc123" {
			t.Fatalf("link not folded in: %+v", n)
		}
	}
}

func TestFileStoreSkipsATornLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "memory.jsonl")
	f := &FileStore{Path: p}
	f.Add(context.Background(), Node{Name: "a", MemoryType: TypeBug})
	fh, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"id":"x","name":"torn`)
	fh.Close()
	issues, err := f.KnownIssues(context.Background())
	if err != nil || len(issues) != 1 {
		t.Fatalf("issues=%v err=%v", issues, err)
	}
}

func TestFileStoreSameIDIsOneMemory(t *testing.T) {
	f := &FileStore{Path: filepath.Join(t.TempDir(), "memory.jsonl")}
	ctx := context.Background()
	f.Add(ctx, Node{ID: "evt-1", Name: "first", MemoryType: TypeBug})
	f.Add(ctx, Node{ID: "evt-1", Name: "again", MemoryType: TypeBug})
	issues, _ := f.KnownIssues(ctx)
	if len(issues) != 1 || issues[0].Name != "again" {
		t.Fatalf("issues = %+v", issues)
	}
}
