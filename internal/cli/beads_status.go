package cli

import (
	"fmt"
	"io"
)

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
