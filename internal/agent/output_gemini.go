package agent

import "strings"

// geminiParser reads "gemini -o stream-json" events.
//
// Gemini streams an assistant reply as "message" events with delta:true.
// The final message is the deltas concatenated since the last event of
// another kind (a tool call, a tool result, a user message), which is the
// model's last uninterrupted reply. Tool results are never read as text.
type geminiParser struct {
	base

	reply   tailBuffer
	inReply bool // the previous known event was an assistant message
	display lineBuf
}

func (p *geminiParser) Line(line []byte) string {
	o, text := jsonLine(line)
	if o == nil {
		return text
	}
	p.setSession(o.str("session_id"))
	switch typ := o.str("type"); typ {
	case "message":
		if o.str("role") == "assistant" {
			return p.assistant(o)
		}
		return p.other("")
	case "tool_use":
		p.res.ToolCalls++
		return p.other(toolLine(o.str("tool_name"), o["parameters"]))
	case "tool_result", "init":
		return p.other("")
	case "error":
		return p.other(p.errorEvent(o))
	case "result":
		return p.other(p.resultEvent(o))
	}
	// Unknown event types say nothing about where a reply ends.
	return ""
}

func (p *geminiParser) assistant(o jobj) string {
	content := o.str("content")
	if !p.inReply {
		p.reply.reset()
		p.inReply = true
	}
	if o.boolean("delta") {
		p.reply.add(content, "")
		return p.display.add(content)
	}
	// A whole message replaces whatever deltas came before it.
	p.reply.set(content)
	return joinDisplay(p.display.flush(), textDisplay(content))
}

// other ends the current reply and shows any of it still pending before
// the new event's own text.
func (p *geminiParser) other(show string) string {
	p.inReply = false
	return joinDisplay(p.display.flush(), show)
}

// errorEvent handles Gemini's error events, which carry a severity: a
// warning is shown, an error also marks the run.
func (p *geminiParser) errorEvent(o jobj) string {
	msg := o.str("message")
	if o.str("severity") == "warning" {
		if msg == "" {
			return ""
		}
		return "warning: " + oneLine(msg, 0)
	}
	return p.errorLine(msg)
}

func (p *geminiParser) resultEvent(o jobj) string {
	if stats := o.obj("stats"); stats != nil {
		p.res.Usage = p.res.Usage.Add(Usage{
			InputTokens:     stats.integer("input_tokens", "input"),
			OutputTokens:    stats.integer("output_tokens"),
			CacheReadTokens: stats.integer("cached"),
		})
		// Gemini counts tool calls itself; trust it when it saw more, for
		// example calls it made without a tool_use event.
		if n := int(stats.integer("tool_calls")); n > p.res.ToolCalls {
			p.res.ToolCalls = n
		}
	}
	status := o.str("status")
	e := o.obj("error")
	if (status == "" || status == "success") && e == nil {
		return ""
	}
	p.res.IsError = true
	msg := e.str("message")
	if msg == "" {
		msg = e.str("type")
	}
	if msg == "" {
		msg = "run ended with status " + status
	}
	p.addError(msg)
	// Gemini CLI 0.61 reports a quota failure in its result event without a
	// code: the API's own wording in the message is the structured signal.
	code, _ := e.num("code")
	if code == 429 || geminiQuota(msg) {
		kind := "rate_limit"
		if geminiQuota(msg) {
			kind = "quota"
		}
		p.setLimit(Limit{Kind: kind, Message: msg})
		return limitDisplay(p.res.Limit)
	}
	return "error: " + oneLine(msg, 0)
}

func (p *geminiParser) Result() Result {
	return p.result(p.reply.String())
}

// Flush returns the part of the last reply not yet shown.
func (p *geminiParser) Flush() string {
	return p.display.flush()
}

// geminiQuota recognises the Gemini API's quota errors as the CLI passes
// them through in its result event.
func geminiQuota(msg string) bool {
	l := strings.ToLower(msg)
	return strings.Contains(l, "exceeded your current quota") || strings.Contains(l, "resource_exhausted") ||
		strings.Contains(l, "quota exceeded for metric")
}
