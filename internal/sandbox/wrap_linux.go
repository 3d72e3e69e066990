package sandbox

import "context"

func wrap(p Policy, argv []string) (Cmd, error) {
	pl, err := resolve(p, argv, bwrapTmp)
	if err != nil {
		return Cmd{}, err
	}
	return Cmd{Args: bwrapArgs(p, pl), Env: pl.env, branch: pl.branch}, nil
}

// Probe says whether the sandbox can start here, and what is missing when
// it cannot.
func Probe(ctx context.Context) error { return probeBwrap(ctx) }
