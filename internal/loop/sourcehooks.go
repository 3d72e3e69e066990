package loop

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Primer is implemented by task sources that have workflow context to put
// in front of every iteration's memory (beads: `bd prime`). MEMORY_LOAD
// calls it first in every iteration; a failure is a warning, never fatal.
type Primer interface {
	Prime(ctx context.Context) (string, error)
}

// Claimer is implemented by task sources that record who works on a task
// (beads: `bd update ID --claim`). STORY_SELECT calls it for the selected
// task; a failure is a warning, never fatal.
type Claimer interface {
	Claim(ctx context.Context, taskID string) error
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
		fmt.Fprintf(b.opts.Out, "  ⚠ %s prime failed, continuing without it: %s\n", b.src.Kind(), clip(err.Error(), 300))
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
		fmt.Fprintf(b.opts.Out, "  ⚠ could not claim %s in %s: %s\n", taskID, b.src.Kind(), clip(err.Error(), 300))
	}
}
