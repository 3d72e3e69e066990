package agent

import "strings"

// codexParser reads "codex exec --json" events.
//
// The final message is the text of the last completed agent_message item.
// Command output (aggregated_output) and other items are never read as
// assistant text. Codex echoes the prompt in its plain output but not in
// this stream, which is one reason to prefer it.
type codexParser struct {
	base

	final   string
	started map[string]bool // ids of tool items counted at item.started
}

// codexToolItems are the item types that are tool invocations.
var codexToolItems = map[string]bool{
	"command_execution": true,
	"mcp_tool_call":     true,
	"web_search":        true,
	"file_change":       true,
}

func (p *codexParser) Line(line []byte) string {
	o, text := jsonLine(line)
	if o == nil {
		return text
	}
	switch o.str("type") {
	case "thread.started":
		p.setSession(o.str("thread_id"))
	case "item.started", "item.updated", "item.completed":
		return p.item(o.str("type"), o.obj("item"))
	case "turn.completed":
		p.res.Usage = p.res.Usage.Add(anthropicUsage(o.obj("usage")))
	case "turn.failed":
		return p.fail(o.obj("error").str("message"))
	case "error":
		return p.fail(o.str("message"))
	}
	return ""
}

func (p *codexParser) item(event string, it jobj) string {
	typ := it.str("type")
	id := it.str("id")
	switch {
	case typ == "agent_message":
		if event != "item.completed" {
			return ""
		}
		text := it.str("text")
		p.final = keepTail(text, maxMessageBytes)
		return textDisplay(text)
	case typ == "error":
		// Error items are warnings, such as missing model metadata; the
		// run goes on, so they do not make it an error.
		if msg := it.str("message"); msg != "" && event == "item.completed" {
			return "warning: " + oneLine(msg, 0)
		}
		return ""
	case codexToolItems[typ]:
		// A tool item is usually reported when it starts and again when it
		// completes (file changes only on completion): count it once.
		if id != "" && p.started[id] {
			if event == "item.completed" {
				delete(p.started, id)
			}
			return ""
		}
		if event == "item.updated" {
			return ""
		}
		if id != "" && event == "item.started" {
			if len(p.started) >= maxOpenCalls {
				clear(p.started)
			}
			p.started[id] = true
		}
		p.res.ToolCalls++
		return codexToolLine(typ, it)
	}
	return ""
}

// codexToolLine is the terminal line for a Codex tool item.
func codexToolLine(typ string, it jobj) string {
	switch typ {
	case "command_execution":
		return toolLine("shell", it["command"])
	case "mcp_tool_call":
		name := it.str("tool")
		if s := it.str("server"); s != "" {
			name = s + "." + name
		}
		return toolLine(name, it["arguments"])
	case "web_search":
		return toolLine("web_search", it.str("query"))
	case "file_change":
		var paths []string
		for _, c := range it.arr("changes") {
			if m, ok := c.(map[string]any); ok {
				if path := jobj(m).str("path"); path != "" {
					paths = append(paths, path)
				}
			}
		}
		return toolLine("edit", strings.Join(paths, " "))
	}
	return toolLine(typ, nil)
}

// fail records an "error" event or a failed turn. Both make the run an
// error; a message about a usage limit or an HTTP 429 is also a limit.
func (p *codexParser) fail(msg string) string {
	p.res.IsError = true
	if msg == "" {
		return ""
	}
	if !p.addError(msg) {
		return "" // the same text as the previous event, already shown
	}
	var l *Limit
	switch {
	case strings.Contains(strings.ToLower(msg), "usage limit"):
		l = &Limit{Kind: "usage_limit", Message: msg}
	case statusRE429.MatchString(msg):
		l = &Limit{Kind: "rate_limit", Message: msg}
	}
	if l == nil {
		return "error: " + oneLine(msg, 0)
	}
	if t, ok := ParseResetTime(msg, p.now()); ok {
		l.ResetsAt = t
	}
	p.setLimit(*l)
	return limitDisplay(p.res.Limit)
}

func (p *codexParser) Result() Result {
	return p.result(p.final)
}
