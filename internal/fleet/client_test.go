package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/errs"
)

// The Temporal secrets come from the environment: a half-set client
// certificate or an unreadable CA bundle is a usage error that names the
// variable, raised before any connection is tried, and no secret shows.
func TestDialRefusesHalfSetTLSVariables(t *testing.T) {
	srv := Server{Address: "127.0.0.1:1", Namespace: "default"}
	t.Setenv(EnvTemporalTLSCert, "/nonexistent/cert.pem")
	t.Setenv(EnvTemporalTLSKey, "")
	_, err := Dial(context.Background(), srv)
	var ue *errs.UsageError
	if !errors.As(err, &ue) || err.Error() != "set both RALPH_TEMPORAL_TLS_CERT and RALPH_TEMPORAL_TLS_KEY for a client certificate, or neither" {
		t.Fatalf("Dial with only a certificate = %v, want the usage error naming both variables", err)
	}

	t.Setenv(EnvTemporalTLSCert, "")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTemporalTLSCA, ca)
	_, err = Dial(context.Background(), srv)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "("+EnvTemporalTLSCA+") holds no PEM certificate") {
		t.Fatalf("Dial with a CA bundle holding no certificate = %v, want the usage error naming %s", err, EnvTemporalTLSCA)
	}
}
