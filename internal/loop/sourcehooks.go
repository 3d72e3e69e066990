package loop

import (
	"context"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
)

// The task-source hooks the loop calls: MEMORY_LOAD primes the memory
// with a Primer's context first in every iteration, STORY_SELECT takes a
// Picker's choice when the board agrees that it can be worked now (not
// blocked in ralph's state, its dependencies done; a task already in
// progress is resumed first) and tells a Claimer which task was selected.
// A failure of any of them is a warning, never fatal: the board's own
// choice and memory are used. They are capabilities of the sources,
// declared in package tasks.
type (
	Primer  = tasks.Primer
	Claimer = tasks.Claimer
	Picker  = tasks.Picker
)

// pick applies a Picker source's choice to the board's selection.
func (b *builder) pick(sel tasks.Selection) tasks.Selection {
	p, ok := b.src.(Picker)
	if !ok || sel.Story.Status == tasks.StatusInProgress {
		return sel
	}
	id, err := p.Pick(context.Background())
	if err != nil {
		b.log.Warn("task source pick failed, using the board's choice", "err", err)
		b.sayf(report.KindWarning, "  ⚠ %s could not pick the next task, using ralph's choice: %s\n", b.src.Kind(), clip(err.Error(), 300))
		return sel
	}
	if id == "" || id == sel.Story.ID {
		return sel
	}
	done := map[string]bool{}
	for _, s := range b.board.Stories {
		if s.Status == tasks.StatusComplete {
			done[s.ID] = true
		}
	}
	for _, s := range b.board.Stories {
		if s.ID != id {
			continue
		}
		if s.Status != tasks.StatusNotStarted || len(s.Subtasks) > 0 || b.st.task(s.ID).Blocker != nil {
			break
		}
		for _, d := range s.DependsOn {
			if !done[d] {
				return sel
			}
		}
		return tasks.Selection{Story: s}
	}
	return sel
}

// primeLimit bounds the primed context carried into the prompt.
const primeLimit = 16 << 10

// prime runs the source's Primer, if any, and returns the text for the
// prompt's memory section ("" when there is none or it failed).
func (b *builder) prime(ctx context.Context) string {
	p, ok := b.src.(Primer)
	if !ok {
		return ""
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	text, err := p.Prime(pctx)
	if err != nil {
		b.log.Warn("task source prime failed, continuing without it", "err", err)
		b.sayf(report.KindWarning, "  ⚠ %s prime failed, continuing without it: %s\n", b.src.Kind(), clip(err.Error(), 300))
		return ""
	}
	return clip(strings.TrimSpace(text), primeLimit)
}

// withPrime puts primed context in front of the rendered memory.
func withPrime(mem, primed string) string {
	if primed == "" {
		return mem
	}
	return primed + "\n\n" + mem
}

// claim tells a Claimer source that the task was selected.
func (b *builder) claim(ctx context.Context, taskID string) {
	c, ok := b.src.(Claimer)
	if !ok {
		return
	}
	if err := c.Claim(context.WithoutCancel(ctx), taskID); err != nil {
		b.log.Warn("task source claim failed", "task", taskID, "err", err)
		b.sayf(report.KindWarning, "  ⚠ could not claim %s in %s: %s\n", taskID, b.src.Kind(), clip(err.Error(), 300))
	}
}
