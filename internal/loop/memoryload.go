package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/tasks"
)

// memoryLoad reads the file memory (progress, task file, agent notes) and
// queries the memory store: one retry after a pause, then the fallback.
func (b *builder) memoryLoad(ctx context.Context) (Event, error) {
	primed := b.prime(ctx) // sources with workflow context (bd prime) go first
	defer func() { b.brief.memText = withPrime(b.brief.memText, primed) }()
	if err := b.reloadBoard(); err != nil {
		return Event{}, err
	}
	var notes []string
	for _, f := range []string{".claude/CLAUDE.md", "AGENTS.md", "CLAUDE.md"} {
		if _, err := os.Stat(filepath.Join(b.ws.Root, f)); err == nil {
			notes = append(notes, f)
		}
	}
	b.brief.projectNotes = notes
	delay := b.opts.MemoryRetryDelay
	if delay == 0 {
		delay = 3 * time.Second
	}
	var agentCtx, issues []memory.Node
	var err error
	for try := 0; try < 2; try++ {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		agentCtx, issues, err = memory.Load(qctx, b.mem)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		if try == 0 {
			b.log.Warn("memory query failed, retrying", "err", err, "delay", delay.String())
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
		}
	}
	if ctx.Err() != nil {
		return Event{}, ErrInterrupted
	}
	b.st.MemoryStore = b.mem.Name()
	// neo4j_connected, the seed's name, says Neo4j answered; with another
	// store only memory_connected is true (see LoopState).
	b.st.MemoryConnected = err == nil
	b.st.Neo4jConnected = err == nil && b.st.MemoryStore == "neo4j"
	if err != nil {
		b.brief.memText = "Memory is unavailable for this iteration."
		return Event{Trigger: TrigMemoryUnavailable}, nil
	}
	b.brief.memText = renderMemory(agentCtx, b.resolveDone(ctx, issues))
	return Event{Trigger: TrigMemoryLoaded}, nil
}

// resolveDone marks the blockers among issues whose task is done on the
// board resolved, and returns the other issues. COMMIT and `ralph unblock`
// resolve a task's blockers as they happen; this catches the ones written
// before ralph did that, and tasks marked done by hand or by a commit that
// a crash cut short, so that a done task's blocker is never shown as a
// known issue.
func (b *builder) resolveDone(ctx context.Context, issues []memory.Node) []memory.Node {
	var open []memory.Node
	for _, n := range issues {
		task := n.Props[memory.PropTask]
		if n.MemoryType != memory.TypeBlocker || task == "" || !b.taskDone(task) {
			open = append(open, n)
			continue
		}
		if err := b.mem.Resolve(context.WithoutCancel(ctx), task, b.opts.now()); err != nil {
			b.log.Warn("memory blockers not resolved", "task", task, "err", err)
		}
	}
	return open
}

// taskDone reports whether the board says task (a story, or a story's
// subtask) is done; a task the board does not know is not.
func (b *builder) taskDone(task string) bool {
	storyID, subID := tasks.ParseTaskID(task)
	story, ok := b.board.Find(storyID)
	if !ok {
		return false
	}
	if story.Status == tasks.StatusComplete || subID == "" {
		return story.Status == tasks.StatusComplete
	}
	for _, st := range story.Subtasks {
		if st.ID == subID {
			return st.Done
		}
	}
	return false
}

func renderMemory(agentCtx, issues []memory.Node) string {
	if len(agentCtx) == 0 && len(issues) == 0 {
		return "Nothing recorded yet."
	}
	var sb strings.Builder
	for _, n := range agentCtx {
		fmt.Fprintf(&sb, "- context: %s%s\n", n.Name, suffix(n.Text))
	}
	for _, n := range issues {
		fmt.Fprintf(&sb, "- %s (%s): %s%s\n", n.MemoryType, n.Date.Format("2006-01-02"), n.Name, suffix(n.Text))
	}
	return strings.TrimRight(sb.String(), "\n")
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + clip(strings.Join(strings.Fields(s), " "), 200)
}
