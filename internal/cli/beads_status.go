package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/tasks"
)

// beadsStatus asks bd about the beads source; nil for other sources.
// Issues bd holds as blocked that ralph's state does not list are added to
// rep.Blocked.
func beadsStatus(src tasks.Source, rep *StatusReport) *BeadsStatus {
	bs, ok := src.(*tasks.BeadsSource)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := bs.Client()
	out := &BeadsStatus{Molecule: bs.Molecule(), Blocked: []string{}}
	v, note, err := c.Check(ctx)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Version, out.Daemon = v.String(), note
	if list, err := c.List(ctx, false, "--status", beads.StatusBlocked); err == nil {
		known := map[string]bool{}
		for _, b := range rep.Blocked {
			known[b.ID] = true
		}
		for _, is := range list {
			out.Blocked = append(out.Blocked, is.ID)
			if !known[is.ID] {
				rep.Blocked = append(rep.Blocked, BlockedTask{ID: is.ID, Reason: "status blocked in beads: " + is.Title, Type: "beads", RequiresHuman: true})
			}
		}
	} else {
		out.Error = err.Error()
	}
	if out.Molecule != "" {
		if p, err := c.MolProgress(ctx, out.Molecule); err == nil {
			out.Progress = &p
		}
		if cur, err := c.MolCurrent(ctx, out.Molecule); err == nil && len(cur) > 0 && cur[0].NextStep != nil {
			out.Current = cur[0].NextStep.ID + ": " + cur[0].NextStep.Title
		}
	}
	return out
}

func printBeadsStatus(w io.Writer, b *BeadsStatus) {
	if b == nil {
		return
	}
	if b.Error != "" {
		fmt.Fprintf(w, "beads: %s\n", b.Error)
		return
	}
	fmt.Fprintf(w, "beads: bd %s · %s · %d blocked in bd\n", b.Version, b.Daemon, len(b.Blocked))
	if b.PendingProto != "" {
		fmt.Fprintf(w, "proto %s is planned: the next ralph build pours it\n", b.PendingProto)
	}
	if b.Molecule != "" {
		if p := b.Progress; p != nil {
			fmt.Fprintf(w, "molecule %s: %d of %d steps done (%.0f%%)\n", b.Molecule, p.Completed, p.Total, p.Percent)
		}
		if b.Current != "" {
			fmt.Fprintf(w, "molecule next step: %s\n", b.Current)
		}
	}
}
