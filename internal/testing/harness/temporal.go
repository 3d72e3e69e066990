package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// DevServer is a Temporal dev server on 127.0.0.1, in memory.
type DevServer struct {
	Bin  string // the Temporal CLI
	Addr string // host:port of its frontend
	Proc *Proc
}

// StartDevServer starts the pinned Temporal CLI that `make temporal`
// builds into .tools/temporal/temporal as a dev server on a free port,
// its log in logDir, and waits up to limit until its default namespace
// answers. The tests that need it fail, never skip, when it is missing.
func StartDevServer(logDir string, env []string, limit time.Duration) (*DevServer, error) {
	root, err := clitest.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, ".tools", "temporal", "temporal")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no Temporal CLI at %s: run `make temporal` (scripts/install-temporal.sh builds the pinned one, "+
			"about 4 minutes the first time; `make test` runs it first): %v", bin, err)
	}
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		addr := net.JoinHostPort("127.0.0.1", port)
		p, err := Start(fmt.Sprintf("temporal-%d", try), logDir, env, filepath.Join(logDir, fmt.Sprintf("temporal-%d.log", try)),
			bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", port, "--ui-port", "0", "--log-level", "warn")
		if err != nil {
			return nil, err
		}
		if !wait.Within(limit, func() bool { return p.Exited() || answers(addr) }) {
			p.Kill()
			return nil, fmt.Errorf("the dev server did not answer on %s within %s:\n%s", addr, limit, Clip(p.Output(), 4000))
		}
		if !p.Exited() {
			return &DevServer{Bin: bin, Addr: addr, Proc: p}, nil
		}
		// Another process may have taken the port between the pick
		// and the server's bind: a server that exited gets another try.
		if try == 3 {
			return nil, fmt.Errorf("the dev server exited (%v):\n%s", p.Err, Clip(p.Output(), 4000))
		}
	}
}

// answers reports whether the server at addr answers for its default
// namespace.
func answers(addr string) bool {
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quiet})
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err == nil
}
