// Package beads is ralph's client for the beads issue tracker's CLI, bd
// (github.com/steveyegge/beads). Ralph never opens the beads database
// itself: every read and write is one bd command, run through a Runner so
// that tests can replace the process with a recording fake.
//
// The client targets bd v1.0.x: storage is embedded Dolt, there is no
// daemon and no `bd sync`. bd's JSON is parsed defensively, because its
// shapes vary between commands and versions: a command may print an array
// or a single object, objects may carry "schema_version", everything may be
// wrapped in the envelope {"schema_version":1,"data":...} (BD_JSON_ENVELOPE=1,
// the announced v2 default), and an error is {"error":"..."} on stdout with
// exit status 1 while hints go to stderr.
package beads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/text"
)

// DirName is the folder bd keeps its database and configuration in.
const DirName = ".beads"

// PinnedVersion is the bd release ralph is built and tested against.
const PinnedVersion = "1.0.5"

// MinVersion is the oldest bd ralph accepts: the JSON shapes and commands
// this client uses (ready --mol, comments add, mol pour/progress/current,
// create --ephemeral) are those of the v1 line.
var MinVersion = Version{Major: 1}

// InstallHint says how to get a suitable bd.
const InstallHint = "install bd " + PinnedVersion + ": `go install github.com/steveyegge/beads/cmd/bd@v" + PinnedVersion +
	"` (needs cgo and a C compiler), or run scripts/install-bd.sh in ralph's repository, which builds it into .tools/bd/bd; " +
	"then put it on PATH or set RALPH_BD to its path"

// ErrNotInstalled is wrapped by errors about a missing bd program.
var ErrNotInstalled = errors.New("bd (beads) is not installed")

// ErrTooOld is wrapped by errors about a bd older than MinVersion.
var ErrTooOld = errors.New("bd (beads) is too old")

// Runner runs one bd command in dir and returns what it printed. A non-zero
// exit status is reported as an error that wraps *exec.ExitError (or any
// error with an ExitCode() int method), alongside the output.
type Runner interface {
	Run(ctx context.Context, dir string, env []string, args []string) (stdout, stderr []byte, err error)
}

// ExecRunner runs the real bd program.
type ExecRunner struct {
	// Bin is the program: a path or a name looked up on PATH.
	Bin string
}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, dir string, env []string, args []string) ([]byte, []byte, error) {
	bin := r.Bin
	if bin == "" {
		bin = "bd"
	}
	if _, err := exec.LookPath(bin); err != nil {
		return nil, nil, fmt.Errorf("%w (%s not found): %s", ErrNotInstalled, bin, InstallHint)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.Bytes(), err
}

// Bin returns the bd program to run: $RALPH_BD when set, else "bd".
func Bin() string {
	if b := os.Getenv("RALPH_BD"); b != "" {
		return b
	}
	return "bd"
}

// Client runs bd commands against the beads database of one repository.
type Client struct {
	// Dir is the repository root; bd finds .beads from there.
	Dir string
	// Runner runs bd; nil means ExecRunner{Bin: Bin()}.
	Runner Runner
	// Actor names who makes changes (bd --actor): the assignee of claims
	// and the author of comments. Empty leaves bd's default.
	Actor string
	// Timeout bounds each command; 0 means two minutes.
	Timeout time.Duration
}

// New returns a client for the repository at dir that runs the real bd as
// actor "ralph".
func New(dir string) *Client {
	return &Client{Dir: dir, Actor: "ralph"}
}

// Error is a bd command that failed.
type Error struct {
	// Args are the command's arguments after "bd".
	Args []string
	// ExitCode is bd's exit status (-1 when it did not exit normally).
	ExitCode int
	// Msg is the "error" field of bd's JSON answer, or empty.
	Msg string
	// Stderr is what bd printed on stderr, trimmed.
	Stderr string
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "bd %s", strings.Join(e.Args, " "))
	if e.ExitCode >= 0 {
		fmt.Fprintf(&sb, " (exit %d)", e.ExitCode)
	}
	switch {
	case e.Msg != "":
		sb.WriteString(": " + e.Msg)
	case e.Stderr != "":
		sb.WriteString(": " + text.Clip(e.Stderr, 400))
	case e.Err != nil:
		sb.WriteString(": " + e.Err.Error())
	}
	return sb.String()
}

func (e *Error) Unwrap() error { return e.Err }

// run runs bd with args and returns its stdout.
func (c *Client) run(ctx context.Context, args ...string) ([]byte, error) {
	r := c.Runner
	if r == nil {
		r = ExecRunner{Bin: Bin()}
	}
	full := args
	if c.Actor != "" {
		full = append([]string{"--actor", c.Actor}, args...)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Never prompt, never colour; the JSON shape is whatever the user's
	// environment asks for (the parser accepts both).
	stdout, stderr, err := r.Run(ctx, c.Dir, []string{"BD_NON_INTERACTIVE=1", "NO_COLOR=1"}, full)
	if err != nil {
		if errors.Is(err, ErrNotInstalled) {
			return nil, err
		}
		e := &Error{Args: args, ExitCode: -1, Stderr: strings.TrimSpace(string(stderr)), Err: err}
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			e.ExitCode = ec.ExitCode()
		}
		if msg, ok := errorMessage(stdout); ok {
			e.Msg = msg
		}
		return stdout, e
	}
	if msg, ok := errorMessage(stdout); ok {
		return stdout, &Error{Args: args, ExitCode: 0, Msg: msg, Stderr: strings.TrimSpace(string(stderr))}
	}
	return stdout, nil
}

// runJSON runs bd with --json and returns the payload with any envelope
// removed.
func (c *Client) runJSON(ctx context.Context, args ...string) (json.RawMessage, error) {
	out, err := c.run(ctx, append(args, "--json")...)
	if err != nil {
		return nil, err
	}
	p, err := Payload(out)
	if err != nil {
		return nil, &Error{Args: append(args, "--json"), ExitCode: 0, Err: err}
	}
	return p, nil
}

// Payload returns bd's JSON answer without the optional envelope
// {"schema_version":N,"data":...}. Text before the first "{" or "[" (a
// stray warning on stdout) is skipped. Empty output is JSON null.
func Payload(out []byte) (json.RawMessage, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return json.RawMessage("null"), nil
	}
	if i := bytes.IndexAny(out, "{["); i > 0 {
		out = out[i:]
	}
	var probe any
	if err := json.Unmarshal(out, &probe); err != nil {
		return nil, fmt.Errorf("bd printed something that is not JSON (%v): %s", err, text.Clip(string(out), 200))
	}
	if obj, ok := probe.(map[string]any); ok {
		if data, has := obj["data"]; has && len(obj) <= 3 {
			if _, sv := obj["schema_version"]; sv {
				b, _ := json.Marshal(data)
				return b, nil
			}
		}
	}
	return json.RawMessage(out), nil
}

// errorMessage reports bd's {"error":"..."} answer, enveloped or not.
func errorMessage(out []byte) (string, bool) {
	p, err := Payload(out)
	if err != nil {
		return "", false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(p, &obj) != nil {
		// An enveloped error may keep "error" beside "data".
		return "", false
	}
	raw, ok := obj["error"]
	if !ok {
		var env map[string]json.RawMessage
		if json.Unmarshal(bytes.TrimSpace(out), &env) == nil {
			raw, ok = env["error"]
		}
	}
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message, true
	}
	return string(raw), len(raw) > 0 && string(raw) != "null"
}

// decodeList decodes an array of T, a single T, or an object holding the
// array under one of keys.
func decodeList[T any](p json.RawMessage, keys ...string) ([]T, error) {
	p = json.RawMessage(bytes.TrimSpace(p))
	if len(p) == 0 || string(p) == "null" {
		return nil, nil
	}
	if p[0] == '[' {
		var list []T
		if err := json.Unmarshal(p, &list); err != nil {
			return nil, fmt.Errorf("decode bd JSON array: %w", err)
		}
		return list, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil {
		return nil, fmt.Errorf("decode bd JSON: %w", err)
	}
	for _, k := range keys {
		if raw, ok := obj[k]; ok {
			return decodeList[T](raw)
		}
	}
	var one T
	if err := json.Unmarshal(p, &one); err != nil {
		return nil, fmt.Errorf("decode bd JSON object: %w", err)
	}
	return []T{one}, nil
}

// Version is a bd release number.
type Version struct {
	Major, Minor, Patch int
	// Raw is the version as bd printed it.
	Raw string
}

func (v Version) String() string {
	if v.Raw != "" {
		return v.Raw
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// HasDaemon reports whether this bd release still has the background
// daemon (`bd daemon`, bd.sock): it was removed in v0.50 with the move to
// Dolt storage.
func (v Version) HasDaemon() bool { return v.Less(Version{Minor: 50}) }

// ParseVersion reads "1.0.5", "v1.0.5" or "bd version 0.49.1 (dev)".
func ParseVersion(s string) (Version, error) {
	for _, f := range strings.Fields(s) {
		f = strings.TrimPrefix(strings.Trim(f, "(),"), "v")
		parts := strings.SplitN(f, ".", 3)
		if len(parts) < 2 {
			continue
		}
		var n [3]int
		ok := true
		for i, p := range parts {
			p = strings.SplitN(p, "-", 2)[0]
			p = strings.SplitN(p, "+", 2)[0]
			x, err := strconv.Atoi(p)
			if err != nil {
				ok = false
				break
			}
			n[i] = x
		}
		if ok {
			return Version{Major: n[0], Minor: n[1], Patch: n[2], Raw: f}, nil
		}
	}
	return Version{}, fmt.Errorf("no version number in %q", text.Clip(s, 100))
}

// Version asks bd for its version (bd version --json, falling back to the
// plain text of older releases).
func (c *Client) Version(ctx context.Context) (Version, error) {
	p, err := c.runJSON(ctx, "version")
	if err == nil {
		var v struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(p, &v) == nil && v.Version != "" {
			return ParseVersion(v.Version)
		}
	} else if errors.Is(err, ErrNotInstalled) {
		return Version{}, err
	}
	out, err2 := c.run(ctx, "version")
	if err2 != nil {
		if err != nil {
			return Version{}, err
		}
		return Version{}, err2
	}
	return ParseVersion(string(out))
}

// Check verifies that bd is installed and recent enough, and returns its
// version and a note about the daemon (see DaemonNote).
func (c *Client) Check(ctx context.Context) (Version, string, error) {
	v, err := c.Version(ctx)
	if err != nil {
		if errors.Is(err, ErrNotInstalled) {
			return v, "", err
		}
		return v, "", fmt.Errorf("could not read bd's version (%v): %s", err, InstallHint)
	}
	if v.Less(MinVersion) {
		return v, DaemonNote(v, c.daemonRunning(ctx, v)), fmt.Errorf("%w: found bd %s, need %s or later: %s", ErrTooOld, v, MinVersion, InstallHint)
	}
	return v, DaemonNote(v, false), nil
}

// daemonRunning asks an old bd whether its daemon is up (`bd daemon
// status`); current releases have no daemon.
func (c *Client) daemonRunning(ctx context.Context, v Version) bool {
	if !v.HasDaemon() {
		return false
	}
	out, err := c.run(ctx, "daemon", "status")
	return err == nil && !strings.Contains(strings.ToLower(string(out)), "not running")
}

// DaemonNote says what ralph expects of the bd daemon for version v:
// current releases need none; releases with a daemon warn when it is not
// running, because they then fall back to direct database access.
func DaemonNote(v Version, running bool) string {
	if !v.HasDaemon() {
		return fmt.Sprintf("bd %s has no daemon and needs none (embedded Dolt storage)", v)
	}
	if running {
		return fmt.Sprintf("bd %s: the daemon is running", v)
	}
	return fmt.Sprintf("warning: bd %s uses a background daemon, which is not running (start it with `bd daemon --start`); ralph works without it", v)
}
