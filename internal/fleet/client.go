package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/ralphloop/ralph/internal/errs"
)

// The environment variables Dial reads the Temporal secrets from: they
// never go in config.toml, and ralph never logs them.
const (
	EnvTemporalAPIKey  = "RALPH_TEMPORAL_API_KEY"  // Temporal Cloud API key (implies TLS)
	EnvTemporalTLSCert = "RALPH_TEMPORAL_TLS_CERT" // path of a client certificate (mTLS)
	EnvTemporalTLSKey  = "RALPH_TEMPORAL_TLS_KEY"  // path of its key
	EnvTemporalTLSCA   = "RALPH_TEMPORAL_TLS_CA"   // path of a CA bundle for a self-signed server
)

// Server is the Temporal frontend Dial connects to, as [engine] names it
// (internal/app fills it from config).
type Server struct {
	Address   string // host:port
	Namespace string
	// TLS asks for TLS even without a client certificate or CA bundle.
	TLS bool
}

// Dial connects to the Temporal frontend e. Secrets come from the
// environment only (EnvTemporalAPIKey and the TLS paths) and never appear
// in an error or a log line. The SDK's own logging is kept to warnings,
// on stderr.
func Dial(ctx context.Context, e Server) (client.Client, error) {
	opts := client.Options{HostPort: e.Address, Namespace: e.Namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	tlsCfg, err := tlsConfig(e)
	if err != nil {
		return nil, err
	}
	opts.ConnectionOptions.TLS = tlsCfg
	if key := os.Getenv(EnvTemporalAPIKey); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
		if opts.ConnectionOptions.TLS == nil {
			opts.ConnectionOptions.TLS = &tls.Config{}
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Temporal server at %s (namespace %s): %v; start one (`temporal server start-dev`, docs/temporal.md) or fix [engine] address", e.Address, e.Namespace, err)
	}
	return c, nil
}

func tlsConfig(e Server) (*tls.Config, error) {
	cert, key, ca := os.Getenv(EnvTemporalTLSCert), os.Getenv(EnvTemporalTLSKey), os.Getenv(EnvTemporalTLSCA)
	if !e.TLS && cert == "" && ca == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if (cert == "") != (key == "") {
		return nil, errs.Usagef("set both %s and %s for a client certificate, or neither", EnvTemporalTLSCert, EnvTemporalTLSKey)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, errs.Usagef("cannot load the client certificate %s named by %s: %v", cert, EnvTemporalTLSCert, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, errs.Usagef("cannot read the CA bundle %s named by %s: %v", ca, EnvTemporalTLSCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errs.Usagef("%s (%s) holds no PEM certificate", ca, EnvTemporalTLSCA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// BuildID is the workflow id of the build of target: one build per
// target branch and task queue at a time, so starting a second one is
// refused while the first runs.
func BuildID(taskQueue, target string) string { return "ralph-build-" + taskQueue + "-" + target }

// ErrAlreadyRunning is returned by Start when a build of the same target
// runs already.
var ErrAlreadyRunning = errors.New("a build of this branch is already running on Temporal")

// Start starts the build workflow. A second start of the same target
// while one runs is refused with ErrAlreadyRunning.
func Start(ctx context.Context, c client.Client, in BuildInput) (client.WorkflowRun, error) {
	id := BuildID(in.Shared, in.Target)
	return startOnce(ctx, c, id, in.Shared, BuildWorkflow, in, fmt.Errorf("%w: %s (see it: ralph status; stop it: ralph stop)", ErrAlreadyRunning, id))
}

// startOnce starts workflow name under id on queue, unless a workflow with
// that id runs already: it then returns running. Ids are builds', threads'
// and sessions', so nothing is started twice.
func startOnce(ctx context.Context, c client.Client, id, queue, name string, in any, running error) (client.WorkflowRun, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// Without it the SDK hands back the run that is already going as
		// if it had started it.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, name, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, running
	}
	return run, err
}

// Running reports whether workflow id runs now (a stopped build runs on
// until its hosts saved the attempts in flight).
func Running(ctx context.Context, c client.Client, id string) bool {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// Query returns a build's status.
func Query(ctx context.Context, c client.Client, id string) (Status, error) {
	return queryWorkflowStatus[Status](ctx, c, id, errs.Usagef("no build %s on the Temporal server: start one with `ralph build --engine temporal`", id))
}

// queryWorkflowStatus asks workflow id for its status Query (builds, threads and
// sessions answer the same name); gone is the error when the server has
// no such workflow.
func queryWorkflowStatus[S any](ctx context.Context, c client.Client, id string, gone error) (S, error) {
	var st S
	v, err := c.QueryWorkflow(ctx, id, "", QueryStatus)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return st, fmt.Errorf("%w (%v)", gone, err)
		}
		return st, err
	}
	return st, v.Get(&st)
}

// Send sends a control command as an Update: the run's validator refuses
// a command it cannot take now (the error says why) and nothing changes.
func Send(ctx context.Context, c client.Client, id string, cmd Command) (string, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: UpdateControl,
		Args: []any{cmd}, WaitForStage: client.WorkflowUpdateStageAccepted})
	if err != nil {
		return "", refused(err)
	}
	var msg string
	if err := (patientUpdate{h}).Get(ctx, &msg); err != nil {
		return "", refused(err)
	}
	return msg, nil
}

func refused(err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return errs.Usagef("no build is running on the Temporal server: nothing to control")
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, "(type: "); i > 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return errs.Usagef("the run refused it: %s", msg)
}

// patientUpdate is an Update handle whose Get polls again when the server
// cut a poll short (gRPC Canceled or DeadlineExceeded, seen under load)
// while the caller still waits: only the caller's ctx ends the wait, and a
// cut poll is never taken for the run's answer.
type patientUpdate struct{ client.WorkflowUpdateHandle }

func (h patientUpdate) Get(ctx context.Context, v any) error {
	for {
		err := h.WorkflowUpdateHandle.Get(ctx, v)
		var cut *client.WorkflowUpdateServiceTimeoutOrCanceledError
		if err == nil || ctx.Err() != nil || !errors.As(err, &cut) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Pollers is how many workers polled queue lately, for workflow and
// activity tasks together: none means no `ralph worker` serves it, and
// whatever waits on it waits for nothing.
func Pollers(ctx context.Context, c client.Client, queue string) (int, error) {
	n := 0
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		d, err := c.DescribeTaskQueue(ctx, queue, kind)
		if err != nil {
			return 0, err
		}
		n += len(d.GetPollers())
	}
	return n, nil
}
