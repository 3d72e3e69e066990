package agent

import (
	"maps"
	"slices"
	"strings"
)

// cursorParser reads "cursor-agent --output-format stream-json" events.
//
// The final message is result.result when a successful result event
// exists, else the last assistant message. Tool results arrive inside
// tool_call "completed" events and are never read as text.
//
// With --stream-partial-output Cursor sends each token as an assistant
// event and then the whole message once more; without it, each assistant
// event is a whole message. Both are handled by accumulating assistant text
// since the last other event and recognising the consolidated copy.
type cursorParser struct {
	base

	reply      tailBuffer // assistant text since the last non-assistant event
	lastReply  string     // the last reply that another event ended
	resultText string
	haveResult bool // a successful result event with a result text was seen
	sawText    bool // assistant text has been shown
	display    lineBuf
	started    map[string]bool // call_ids counted at "started"
}

func (p *cursorParser) Line(line []byte) string {
	o, text := jsonLine(line)
	if o == nil {
		return text
	}
	p.setSession(o.str("session_id"))
	switch o.str("type") {
	case "assistant":
		return p.assistant(o.obj("message"))
	case "tool_call":
		return p.other(p.toolCall(o))
	case "result":
		return p.other(p.resultEvent(o))
	case "error":
		return p.other(p.errorLine(o.firstStr("message", "error")))
	case "system", "user":
		return p.other("")
	}
	// "thinking" deltas and unknown events neither end a reply nor show.
	return ""
}

func (p *cursorParser) assistant(msg jobj) string {
	var sb strings.Builder
	for _, b := range contentBlocks(msg) {
		if b.str("type") == "text" {
			sb.WriteString(b.str("text"))
		}
	}
	t := sb.String()
	if t == "" {
		return ""
	}
	if p.reply.equal(t) {
		// The consolidated copy of the deltas just streamed: the message
		// is complete, so show what is left of it.
		return p.display.flush()
	}
	p.reply.add(t, "")
	p.sawText = true
	return p.display.add(t)
}

// other ends the current reply and shows any of it still pending before
// the new event's own text.
func (p *cursorParser) other(show string) string {
	pending := p.display.flush()
	if !p.reply.empty() {
		p.lastReply = p.reply.String()
	}
	p.reply.reset()
	return joinDisplay(pending, show)
}

func (p *cursorParser) toolCall(o jobj) string {
	id := o.str("call_id")
	switch o.str("subtype") {
	case "started":
		if id != "" {
			if len(p.started) >= maxOpenCalls {
				clear(p.started)
			}
			p.started[id] = true
		}
	case "completed":
		if id != "" && p.started[id] {
			delete(p.started, id)
			return ""
		}
	default:
		return ""
	}
	p.res.ToolCalls++
	name, args := cursorTool(o.obj("tool_call"))
	return toolLine(name, args)
}

// cursorTool names a Cursor tool call. The call is an object with one key
// such as "shellToolCall" holding {"args": …}, or an OpenAI-style
// "function" with a name and JSON arguments.
func cursorTool(tc jobj) (string, any) {
	if f := tc.obj("function"); f != nil {
		return f.str("name"), f["arguments"]
	}
	// Sorted, so that an object with several keys is named the same way
	// every time.
	for _, k := range slices.Sorted(maps.Keys(tc)) {
		if m, ok := tc[k].(map[string]any); ok {
			return strings.TrimSuffix(k, "ToolCall"), jobj(m)["args"]
		}
	}
	return "tool", nil
}

func (p *cursorParser) resultEvent(o jobj) string {
	if u := o.obj("usage"); u != nil {
		p.res.Usage = p.res.Usage.Add(anthropicUsage(u))
	}
	text := o.str("result")
	if o.boolean("is_error") || strings.HasPrefix(o.str("subtype"), "error") {
		msg := text
		if msg == "" {
			msg = o.firstStr("error", "subtype")
		}
		return p.errorLine(msg)
	}
	if _, ok := o["result"].(string); ok {
		p.resultText = keepTail(text, maxMessageBytes)
		p.haveResult = true
	}
	// The result repeats the assistant text already shown; show it only
	// when there was none (--output-format json).
	if text != "" && !p.sawText {
		return textDisplay(text)
	}
	return ""
}

func (p *cursorParser) Result() Result {
	if p.haveResult {
		return p.result(p.resultText)
	}
	if !p.reply.empty() {
		return p.result(p.reply.String())
	}
	return p.result(p.lastReply)
}

// Flush returns the part of the last reply not yet shown.
func (p *cursorParser) Flush() string {
	return p.display.flush()
}
