//go:build !linux && !darwin

package sandbox

import (
	"context"
	"runtime"
)

func wrap(Policy, []string) (Cmd, error) { return Cmd{}, unsupported(runtime.GOOS) }

// Probe says that there is no sandbox here.
func Probe(context.Context) error { return unsupported(runtime.GOOS) }
