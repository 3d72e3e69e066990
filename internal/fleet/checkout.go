package fleet

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/verify"
)

// checkoutMoved notices that the integrating host's own target branch
// (the person's main, which catchUp keeps at the run's tip after every
// landing) was moved outside ralph to commits the run does not have: by
// an agent working in a worktree of this repository, or by hand. A move
// to a commit where a check fails that passes on the run's tip stops the
// run, as a moved tip does and as the local engine stops on its target:
// the person would otherwise find main broken and none of the run's work
// on it. A move where the checks pass as before is catchUp's to say
// (it leaves the branch alone and names where the run's work is).
func (h *Host) checkoutMoved(ctx context.Context, in LandInput, integ *gitx.Repo, tip, records string) error {
	cur, err := h.WS.Repo.RevParse(ctx, in.Target)
	if err != nil || cur == tip {
		return nil // no such branch here, or where ralph left it
	}
	if behind, err := h.WS.Repo.IsAncestor(ctx, cur, tip); err != nil || behind {
		return nil // behind the run: catchUp moves it on
	}
	if err := integ.DetachAt(ctx, cur); err != nil {
		return err
	}
	defer integ.DetachAt(context.WithoutCancel(ctx), tip)
	_, fresh, err := landing.JudgeMove(ctx, h.checker().RunCheck, integ, records, h.Checks, tip, cur, "checkout-checks.json")
	if err != nil || len(fresh) == 0 {
		return err
	}
	return &verify.MovedError{Target: in.Target, From: tip, To: cur, Failing: fresh,
		PutBack: fmt.Sprintf("`git update-ref refs/heads/%s %s %s` in the integrating host's checkout %s", in.Target, tip, cur, h.WS.Root)}
}
