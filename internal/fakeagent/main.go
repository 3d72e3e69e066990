package fakeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Main runs the fake agent as a process would: args are the command-line
// arguments without the program name. It returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	prompt, err := readPrompt(args, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "fakeagent: %v\n", err)
		return ExitBadInput
	}
	path := os.Getenv(EnvScenario)
	if path == "" {
		fmt.Fprintf(stderr, "fakeagent: %s is not set; it must name a scenario JSON file\n", EnvScenario)
		return ExitBadInput
	}
	sc, err := LoadScenario(path)
	if err != nil {
		fmt.Fprintf(stderr, "fakeagent: %v\n", err)
		return ExitBadInput
	}
	idx, call, err := claim(path, sc, prompt)
	if err != nil {
		fmt.Fprintf(stderr, "fakeagent: %v\n", err)
		return ExitBadInput
	}
	if idx < 0 {
		fmt.Fprintln(stderr, "fakeagent: no invocation matches the prompt")
		return ExitNoMatch
	}
	r := &runner{
		claude:    sc.Format == FormatClaude,
		stdout:    stdout,
		stderr:    stderr,
		prompt:    prompt,
		sessionID: fmt.Sprintf("fake-%d", call),
		start:     time.Now(),
	}
	return r.run(sc.Invocations[idx])
}

// readPrompt reads the prompt from --prompt-file PATH, else from the last
// positional argument if it names an existing file, else from stdin.
func readPrompt(args []string, stdin io.Reader) (string, error) {
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--prompt-file" {
			if i+1 >= len(args) {
				return "", errors.New("--prompt-file needs a path")
			}
			return readPromptFile(args[i+1])
		}
		if p, ok := strings.CutPrefix(a, "--prompt-file="); ok {
			return readPromptFile(p)
		}
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") {
			positional = append(positional, a)
		}
	}
	if n := len(positional); n > 0 {
		if fi, err := os.Stat(positional[n-1]); err == nil && fi.Mode().IsRegular() {
			return readPromptFile(positional[n-1])
		}
	}
	if stdin == nil {
		return "", nil
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("read prompt from stdin: %v", err)
	}
	return string(data), nil
}

func readPromptFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read prompt: %v", err)
	}
	return string(data), nil
}

// runner runs the steps of one invocation.
type runner struct {
	claude         bool
	stdout, stderr io.Writer
	prompt         string
	sessionID      string
	start          time.Time

	resultSent   bool
	lastText     string
	turns        int
	outputTokens int
	msgN, toolN  int
}

// stepError carries the exit code of a failed step.
type stepError struct {
	code int
	msg  string
}

func (e *stepError) Error() string { return e.msg }

// exitNow is returned by an exit step.
type exitNow struct{ code int }

func (e *exitNow) Error() string { return fmt.Sprintf("exit %d", e.code) }

func (r *runner) run(inv Invocation) int {
	if r.claude {
		r.emitInit()
	}
	for i, st := range inv.Steps {
		kind, err := st.Action()
		if err == nil {
			err = r.step(kind, st)
		}
		if err != nil {
			var ex *exitNow
			if errors.As(err, &ex) {
				return ex.code
			}
			code := ExitStepFailed
			var se *stepError
			if errors.As(err, &se) {
				code = se.code
			}
			fmt.Fprintf(r.stderr, "fakeagent: step %d (%s): %v\n", i+1, kind, err)
			return code
		}
	}
	if r.claude && !r.resultSent {
		r.emitResult(r.lastText)
	}
	return inv.Exit
}

func (r *runner) step(kind string, st Step) error {
	switch kind {
	case "write":
		return fileStep(writeFile(st.Write, st.Content, false))
	case "append":
		return fileStep(writeFile(st.Append, st.Content, true))
	case "replace":
		return fileStep(replaceInFile(st.Replace, st.Old, st.New))
	case "check_story":
		return fileStep(r.checkStory(st))
	case "run":
		return r.command(exec.Command("sh", "-c", st.Run), st.IgnoreError)
	case "commit":
		if err := r.command(exec.Command("git", "add", "-A"), st.IgnoreError); err != nil {
			return err
		}
		return r.command(exec.Command("git", "commit", "-q", "-m", st.Commit), st.IgnoreError)
	case "say":
		r.say(st.Say)
	case "tool":
		r.tool(st.Tool, st.Input, st.Output)
	case "echo_prompt":
		r.echoPrompt()
	case "stderr":
		io.WriteString(r.stderr, withNewline(st.Stderr))
		flush(r.stderr)
	case "sleep":
		d, _ := time.ParseDuration(st.Sleep) // checked by Action
		time.Sleep(d)
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "flood":
		return r.flood(st.Flood, st.Newlines)
	case "ignore_sigterm":
		signal.Ignore(syscall.SIGTERM)
	case "limit":
		t, _ := time.Parse(time.RFC3339, st.Limit) // checked by Action
		r.limit(t)
	case "final":
		r.say(st.Final)
		if r.claude {
			r.emitResult(st.Final)
		}
	case "exit":
		return &exitNow{code: *st.Exit}
	default:
		return fmt.Errorf("unknown step %q", kind)
	}
	return nil
}

func fileStep(err error) error {
	if err == nil {
		return nil
	}
	return &stepError{code: ExitStepFailed, msg: err.Error()}
}

func writeFile(path, content string, appendTo bool) error {
	if err := os.MkdirAll(parentDir(path), 0o755); err != nil {
		return err
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parentDir(path string) string {
	i := strings.LastIndex(path, "/")
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return path[:i]
}

func replaceInFile(path, old, new string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Contains(data, []byte(old)) {
		return fmt.Errorf("%s does not contain %q", path, old)
	}
	return rewriteFile(path, strings.Replace(string(data), old, new, 1))
}

// rewriteFile replaces the content of an existing file, keeping its mode.
func rewriteFile(path, content string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), fi.Mode().Perm())
}

func (r *runner) checkStory(st Step) error {
	path := st.PRD
	if path == "" {
		p, err := prdPathFromPrompt(r.prompt)
		if err != nil {
			return err
		}
		path = p
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := checkStory(string(data), st.CheckStory)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return rewriteFile(path, out)
}

// command runs cmd in the current directory with its output on the fake's
// stderr, so that it never looks like assistant text.
func (r *runner) command(cmd *exec.Cmd, ignoreError bool) error {
	cmd.Stdout = r.stderr
	cmd.Stderr = r.stderr
	err := cmd.Run()
	flush(r.stderr)
	if err == nil || ignoreError {
		return nil
	}
	return &stepError{code: ExitCommandFailed, msg: fmt.Sprintf("%s: %v", strings.Join(cmd.Args, " "), err)}
}

func (r *runner) say(text string) {
	r.lastText = text
	if !r.claude {
		r.writeText(withNewline(text))
		return
	}
	r.emitAssistant([]any{textBlock{Type: "text", Text: text}}, "", "")
}

func (r *runner) tool(name, input, output string) {
	if !r.claude {
		s := "$ " + withNewline(input)
		if output != "" {
			s += withNewline(output)
		}
		r.writeText(s)
		return
	}
	r.toolN++
	id := fmt.Sprintf("toolu_fake_%d", r.toolN)
	r.emitAssistant([]any{toolUseBlock{Type: "tool_use", ID: id, Name: name, Input: toolInput(name, input)}}, "tool_use", "")
	r.emit(userEvent{
		Type: "user",
		Message: userMessage{Role: "user", Content: []any{
			toolResultBlock{ToolUseID: id, Type: "tool_result", Content: output, IsError: false},
		}},
		SessionID:     r.sessionID,
		UUID:          newUUID(),
		ToolUseResult: &toolUseResult{Stdout: output},
	})
}

func (r *runner) echoPrompt() {
	if !r.claude {
		r.writeText(withNewline(r.prompt))
		return
	}
	r.emit(userEvent{
		Type:      "user",
		Message:   userMessage{Role: "user", Content: []any{textBlock{Type: "text", Text: r.prompt}}},
		SessionID: r.sessionID,
		UUID:      newUUID(),
	})
}

func (r *runner) limit(t time.Time) {
	if !r.claude {
		r.writeText(fmt.Sprintf("You've hit your usage limit. Try again at %s.\n", t.UTC().Format(time.RFC3339)))
		return
	}
	msg := fmt.Sprintf("You've hit your session limit · resets %s (UTC)", t.UTC().Format("3:04pm"))
	r.emit(rateLimitEvent{
		Type: "rate_limit_event",
		RateLimitInfo: rateLimitInfo{
			Status:                "rejected",
			ResetsAt:              t.Unix(),
			RateLimitType:         "five_hour",
			OverageStatus:         "rejected",
			OverageDisabledReason: "org_level_disabled",
		},
		SessionID: r.sessionID,
		UUID:      newUUID(),
	})
	r.lastText = msg
	r.emitAssistant([]any{textBlock{Type: "text", Text: msg}}, "", "rate_limit")
	status := 429
	r.emitResultEvent(resultEvent{
		Subtype:        "success",
		IsError:        true,
		APIErrorStatus: &status,
		Result:         msg,
		TotalCostUSD:   0,
		Usage:          usage{ServiceTier: "standard"},
		ModelUsage:     map[string]modelUsage{},
	})
}

// floodChunk is a whole number of 80-byte lines, so a chunk boundary never
// breaks the line pattern.
const floodChunk = 80 * 820

func (r *runner) flood(n int64, newlines bool) error {
	buf := bytes.Repeat([]byte("x"), floodChunk)
	if newlines {
		for i := 79; i < len(buf); i += 80 {
			buf[i] = '\n'
		}
	}
	for n > 0 {
		c := int64(len(buf))
		if n < c {
			c = n
		}
		if _, err := r.stdout.Write(buf[:c]); err != nil {
			return &stepError{code: ExitStepFailed, msg: "flood: " + err.Error()}
		}
		n -= c
	}
	flush(r.stdout)
	return nil
}

func (r *runner) emitInit() {
	cwd, _ := os.Getwd()
	r.emit(initEvent{
		Type:              "system",
		Subtype:           "init",
		CWD:               cwd,
		SessionID:         r.sessionID,
		Tools:             []string{"Bash", "Edit", "Read", "Write"},
		MCPServers:        []any{},
		Model:             fakeModel,
		PermissionMode:    "bypassPermissions",
		SlashCommands:     []string{},
		APIKeySource:      "none",
		ClaudeCodeVersion: fakeVersion,
		OutputStyle:       "default",
		Agents:            []string{},
		Skills:            []string{},
		Plugins:           []any{},
		UUID:              newUUID(),
	})
}

func (r *runner) emitAssistant(content []any, stopReason, errKind string) {
	r.msgN++
	r.turns++
	out := 0
	for _, c := range content {
		switch b := c.(type) {
		case textBlock:
			out += tokens(b.Text)
		case toolUseBlock:
			out += tokens(string(b.Input))
		}
	}
	r.outputTokens += out
	var sr *string
	if stopReason != "" {
		sr = &stopReason
	}
	model := fakeModel
	if errKind != "" {
		model = "<synthetic>"
	}
	r.emit(assistantEvent{
		Type: "assistant",
		Message: assistantMessage{
			ID:         fmt.Sprintf("msg_fake_%d", r.msgN),
			Type:       "message",
			Role:       "assistant",
			Model:      model,
			Content:    content,
			StopReason: sr,
			Usage: usage{
				InputTokens:  tokens(r.prompt),
				OutputTokens: out,
				ServiceTier:  "standard",
			},
		},
		SessionID: r.sessionID,
		UUID:      newUUID(),
		Error:     errKind,
	})
}

func (r *runner) emitResult(text string) {
	in := tokens(r.prompt)
	r.emitResultEvent(resultEvent{
		Subtype: "success",
		Result:  text,
		Usage: usage{
			InputTokens:  in,
			OutputTokens: r.outputTokens,
			ServiceTier:  "standard",
		},
		TotalCostUSD: fakeCostUSD,
		ModelUsage: map[string]modelUsage{fakeModel: {
			InputTokens:     in,
			OutputTokens:    r.outputTokens,
			CostUSD:         fakeCostUSD,
			ContextWindow:   200000,
			MaxOutputTokens: 64000,
		}},
	})
}

// emitResultEvent fills the common fields of a result event and writes it.
func (r *runner) emitResultEvent(ev resultEvent) {
	r.resultSent = true
	ev.Type = "result"
	ev.DurationMS = time.Since(r.start).Milliseconds()
	ev.DurationAPIMS = ev.DurationMS
	ev.NumTurns = max(r.turns, 1)
	ev.SessionID = r.sessionID
	endTurn := "end_turn"
	ev.StopReason = &endTurn
	ev.PermissionDenials = []any{}
	ev.TerminalReason = "completed"
	ev.UUID = newUUID()
	r.emit(ev)
}

// emit writes one event as one JSON line in a single write, then flushes.
// HTML escaping is off so that "<promise>" stays readable, as in Claude Code.
func (r *runner) emit(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(r.stderr, "fakeagent: encode event: %v\n", err)
		return
	}
	r.stdout.Write(buf.Bytes())
	flush(r.stdout)
}

func (r *runner) writeText(s string) {
	io.WriteString(r.stdout, s)
	flush(r.stdout)
}

// flush flushes w if it buffers (a *bufio.Writer, for example).
func flush(w io.Writer) {
	if f, ok := w.(interface{ Flush() error }); ok {
		f.Flush()
	}
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
