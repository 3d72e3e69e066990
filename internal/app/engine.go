package app

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/fleet"
)

// TemporalServer is the Temporal frontend [engine] names.
func TemporalServer(e config.EngineSection) fleet.Server {
	return fleet.Server{Address: e.Address, Namespace: e.Namespace, TLS: e.TLS}
}

// DialTemporal connects to the Temporal frontend [engine] names; the
// secrets come from the environment (fleet.EnvTemporalAPIKey and the TLS
// paths).
func DialTemporal(ctx context.Context, e config.EngineSection) (client.Client, error) {
	return fleet.Dial(ctx, TemporalServer(e))
}
