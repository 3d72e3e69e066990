package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/sandbox"
)

// MaxLineBytes bounds one line of agent output held in memory. Longer lines
// are cut (the raw log still receives every byte), so an agent that floods
// output without newlines cannot exhaust ralph's memory.
const MaxLineBytes = 1 << 20

// Invocation is one headless agent run.
type Invocation struct {
	Spec       Spec
	Prompt     string
	PromptFile string // where Prompt was written; substituted for {prompt}
	Dir        string
	Log        io.Writer // raw stdout and stderr, every byte
	Display    io.Writer // human-readable progress for the terminal
	Timeout    time.Duration
	// IdleTimeout ends a run that prints nothing for this long.
	IdleTimeout time.Duration
	// OnStart receives the agent's process group id once it runs.
	OnStart func(pgid int)
	// OnExit is called once the agent's process group is stopped, before
	// Run looks for the processes that left the group, a scan of every
	// process on the machine. It must not block: a caller that reads the
	// work tree next starts that in a goroutine here, beside the scan.
	OnExit func()
	// Token tags every process of this run: it is put in the agent's
	// environment as TokenVar, so that a scan of /proc finds the agent and
	// everything it started, in its process group or not. A caller that
	// must stop an agent left behind by its own crash saves the token
	// before calling Run; "" makes Run pick one for its own clean-up.
	Token string
	// Redactor masks secrets in the log, the display and the Result; nil
	// means redact.Default().
	Redactor *redact.Redactor
	// MaxLogBytes bounds what Log receives: past it only the first and
	// the last half are kept (0 means DefaultMaxLogBytes).
	MaxLogBytes int64
	// Sandbox, when set, runs the agent under it (Dir is its work tree
	// unless it names one); nil runs the agent as the user.
	Sandbox *sandbox.Policy
	// OnDenied is told each connection the sandbox's allow-list proxy
	// refused (network "proxy"), as it happens, from another goroutine;
	// the Result lists them all.
	OnDenied func(sandbox.Denied)
}

// TokenVar is the environment variable that carries Invocation.Token.
const TokenVar = "RALPH_AGENT_TOKEN"

// NewToken returns a random token for Invocation.Token.
func NewToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// StopLeftover stops an agent run that outlived ralph: every process
// tagged with token, and the process group pgid (0 when not recorded) when
// one of its members is tagged or is the group's leader started at start
// (proc.Process.Start as recorded; 0 when not). A group number alone is
// never enough: after a crash it may belong to anyone's program.
func StopLeftover(token string, pgid int, start uint64) proc.Stopped {
	keep := proc.Identity(pgid, start)
	if token == "" {
		if pgid <= 1 || start == 0 {
			// A record from an older ralph has only the group: nothing
			// proves that its members are still the agent's.
			return proc.Stopped{}
		}
		return proc.StopTagged("", pgid, keep, proc.DefaultGrace)
	}
	return proc.StopTagged(proc.Tag(TokenVar, token), pgid, keep, proc.DefaultGrace)
}

// Outcome is what a headless run produced.
type Outcome struct {
	proc.Outcome
	Result      Result
	OutputBytes int64
	// LogCutBytes is how much of the output the raw log lost to
	// MaxLogBytes; 0 when it holds every byte.
	LogCutBytes int64
	// StderrTail is the end of what the agent wrote to stderr, where CLIs
	// say that they cannot run (not logged in, unknown option).
	StderrTail string
	// Strays are the agent's processes that outlived it outside its
	// process group (setsid); Run stopped them.
	Strays []proc.Process
}

// stderrTailBytes bounds Outcome.StderrTail.
const stderrTailBytes = 4 << 10

// Argv returns argv with {prompt} replaced and whether the prompt must go on
// stdin (no element named the file).
func Argv(argv []string, promptFile string) ([]string, bool) {
	out := make([]string, len(argv))
	usesFile := false
	for i, a := range argv {
		if strings.Contains(a, PromptPlaceholder) {
			usesFile = true
			a = strings.ReplaceAll(a, PromptPlaceholder, promptFile)
		}
		out[i] = a
	}
	return out, !usesFile
}

// Env returns the environment for an agent: ralph's own, minus variables
// that make nested agent CLIs misbehave and the notification secret.
func Env() []string { return proc.Environ(nestingEnv...) }

// Run runs the agent headless: the prompt goes on stdin (or in the file),
// stdout is parsed line by line as it streams, and the whole process group
// is killed on timeout or when ctx is cancelled.
func Run(ctx context.Context, inv Invocation) (Outcome, error) {
	argv, useStdin := Argv(inv.Spec.Headless, inv.PromptFile)
	if err := CheckInstalled(inv.Spec, argv); err != nil {
		return Outcome{Outcome: proc.Outcome{ExitCode: -1, NotFound: true}}, err
	}
	red := inv.Redactor
	if red == nil {
		red = redact.Default()
	}
	token := inv.Token
	if token == "" {
		token = NewToken()
	}
	// The parser sees output with secrets masked, so it must compare it
	// with the prompt masked the same way.
	parser := NewParser(inv.Spec.Format, red.Redact(inv.Prompt))
	var mu sync.Mutex // the log and the display are shared by stdout and stderr
	// stdout and stderr each have their own redaction stream: one shared
	// buffer would let the other stream's output end a secret's first
	// half as a line, and both halves reach the log readable.
	outLog, errLog := io.Discard, io.Discard
	var rOut, rErr *redact.Writer
	var capped *headTailWriter
	if inv.Log != nil {
		capped = newHeadTailWriter(inv.Log, inv.MaxLogBytes)
		rOut, rErr = redact.NewWriter(capped, red), redact.NewWriter(capped, red)
		outLog, errLog = rOut, rErr
	}
	errTail := proc.NewTailBuffer(stderrTailBytes)
	display := inv.Display
	if display == nil {
		display = io.Discard
	}
	var total int64
	logTo := func(w io.Writer) func([]byte) {
		return func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			total += int64(len(b))
			w.Write(b)
		}
	}
	stdout := &lineWriter{max: MaxLineBytes, raw: logTo(outLog), line: func(line []byte, lineLen int) {
		mu.Lock()
		defer mu.Unlock()
		line = []byte(red.Redact(string(line)))
		if text := parser.Line(line); text != "" {
			io.WriteString(display, clipDisplay(text, lineLen))
			io.WriteString(display, "\n")
		}
	}}
	stderr := &lineWriter{max: MaxLineBytes, raw: logTo(errLog), line: func(line []byte, lineLen int) {
		mu.Lock()
		defer mu.Unlock()
		line = []byte(red.Redact(string(line)))
		errTail.Write(line)
		errTail.Write([]byte{'\n'})
		if len(bytes.TrimSpace(line)) > 0 {
			io.WriteString(display, "  │ "+clipDisplay(string(line), lineLen)+"\n")
		}
	}}
	pgid := 0
	spec := proc.Spec{
		Args:        argv,
		Dir:         inv.Dir,
		Env:         append(Env(), proc.Tag(TokenVar, token)),
		Stdout:      stdout,
		Stderr:      stderr,
		Timeout:     inv.Timeout,
		IdleTimeout: inv.IdleTimeout,
		OnStart: func(pid int) {
			pgid = pid
			if inv.OnStart != nil {
				inv.OnStart(pid)
			}
		},
	}
	if useStdin {
		spec.Stdin = strings.NewReader(inv.Prompt)
	}
	var denied []sandbox.Denied
	stopProxy := func() {}
	var box sandbox.Cmd
	if inv.Sandbox != nil {
		p := *inv.Sandbox
		var err error
		stopProxy, err = startProxy(&p, inv.Spec, spec.Env, func(d sandbox.Denied) {
			mu.Lock()
			denied = append(denied, d)
			mu.Unlock()
			if inv.OnDenied != nil {
				inv.OnDenied(d)
			}
		})
		if err != nil {
			return Outcome{Outcome: proc.Outcome{ExitCode: -1}}, err
		}
		if box, err = sandboxed(p, inv.Spec, spec.Args, spec.Env, inv.Dir, inv.PromptFile); err != nil {
			stopProxy()
			return Outcome{Outcome: proc.Outcome{ExitCode: -1}}, err
		}
		spec.Args, spec.Env = box.Args, box.Env
	}
	out, err := proc.Run(ctx, spec)
	stopProxy()
	// The agent's commits reach its branch before anyone reads it.
	if lerr := box.Land(); lerr != nil && err == nil {
		err = lerr
	}
	if inv.OnExit != nil && pgid > 0 {
		inv.OnExit()
	}
	stdout.Flush()
	stderr.Flush()
	var logCut int64
	if capped != nil {
		rOut.Flush()
		rErr.Flush()
		capped.Close()
		logCut = capped.Cut()
	}
	if f, ok := parser.(Flusher); ok {
		if text := f.Flush(); text != "" {
			io.WriteString(display, text+"\n")
		}
	}
	res := Outcome{Outcome: out, Result: parser.Result(), OutputBytes: total, LogCutBytes: logCut, StderrTail: string(errTail.Bytes())}
	res.Result.Denied = denied
	if pgid > 0 {
		// Run stopped the agent's process group; what left the group
		// (setsid) would go on changing the tree while ralph judges and
		// commits it.
		res.Strays = proc.StopTagged(proc.Tag(TokenVar, token), pgid, nil, time.Second).Escaped
	}
	return res, err
}

// RunInteractive runs the agent's interactive argv attached to the
// terminal, under box when it is not nil (keeping the terminal: see
// sandbox.Policy.Terminal). It is not put in its own process group: a
// background process group may not read the terminal. Cancelling ctx
// still ends it.
func RunInteractive(ctx context.Context, s Spec, promptFile, prompt, dir string, box *sandbox.Policy, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	argv, useStdin := Argv(s.Interactive, promptFile)
	if err := CheckInstalled(s, argv); err != nil {
		return -1, err
	}
	env := Env()
	var boxed sandbox.Cmd
	if box != nil {
		p := *box
		p.Terminal = true
		// Nothing journals an interactive run: a refused connection is
		// said on the terminal the person is watching.
		stopProxy, err := startProxy(&p, s, env, func(d sandbox.Denied) {
			fmt.Fprintf(stderr, "\nralph: ⛔ sandbox: denied a connection to %s\n", net.JoinHostPort(d.Host, strconv.Itoa(d.Port)))
		})
		if err != nil {
			return -1, err
		}
		defer stopProxy()
		if boxed, err = sandboxed(p, s, argv, env, dir, promptFile); err != nil {
			return -1, err
		}
		argv, env = boxed.Args, boxed.Env
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = stdin
	if useStdin {
		cmd.Stdin = strings.NewReader(prompt)
	}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if lerr := boxed.Land(); lerr != nil {
		return -1, lerr
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// maxDisplayLine bounds what one line of agent output shows on the
// terminal; the raw log keeps everything.
const maxDisplayLine = 2000

// clipDisplay cuts text for the terminal. full is the length of the line as
// the agent wrote it, which may exceed what ralph kept in memory.
func clipDisplay(text string, full int) string {
	if len(text) <= maxDisplayLine && full <= MaxLineBytes {
		return text
	}
	cut := min(len(text), maxDisplayLine)
	for cut > 0 && !utf8.RuneStart(text[cut]) && cut < len(text) {
		cut--
	}
	return fmt.Sprintf("%s… [line cut: %d bytes]", text[:cut], max(full, len(text)))
}

// lineWriter passes every byte to raw as it arrives (so the log is complete
// and in order) and complete lines to line. A line longer than max is cut
// to its first max bytes, which bounds memory however an agent floods.
type lineWriter struct {
	max  int
	buf  []byte
	n    int // length of the current line as written, beyond max too
	raw  func([]byte)
	line func(line []byte, length int)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.raw(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
			p = p[i+1:]
		} else {
			p = nil
		}
		w.n += len(chunk)
		if room := w.max - len(w.buf); room > 0 {
			if len(chunk) > room {
				chunk = chunk[:room]
			}
			w.buf = append(w.buf, chunk...)
		}
		if i >= 0 {
			w.Flush()
		}
	}
	return n, nil
}

// Flush emits the pending line, if any.
func (w *lineWriter) Flush() {
	if len(w.buf) == 0 {
		return
	}
	w.line(bytes.TrimRight(w.buf, "\r"), w.n)
	w.buf = w.buf[:0]
	w.n = 0
}
