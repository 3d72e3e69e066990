package agent

// droidParser reads Factory's "droid exec -o stream-json" events.
//
// The final message is completion.finalText when the run completed, else
// the last assistant message. Tool results are never read as text.
type droidParser struct {
	base

	lastText  string
	final     string
	completed bool // a completion or successful result event was seen
	sawText   bool // assistant text has been shown
}

func (p *droidParser) Line(line []byte) string {
	o, text := jsonLine(line)
	if o == nil {
		return text
	}
	p.setSession(o.firstStr("session_id", "sessionId"))
	switch o.str("type") {
	case "message":
		if o.str("role") != "assistant" {
			return ""
		}
		t := o.firstStr("text", "content")
		p.lastText = keepTail(t, maxMessageBytes)
		if t != "" {
			p.sawText = true
		}
		return textDisplay(t)
	case "tool_call":
		p.res.ToolCalls++
		input := o["parameters"]
		if input == nil {
			input = o["arguments"]
		}
		return toolLine(o.firstStr("toolName", "toolId", "name"), input)
	case "completion":
		if u := o.obj("usage"); u != nil {
			p.res.Usage = p.res.Usage.Add(anthropicUsage(u))
		}
		t, ok := o["finalText"].(string)
		if ok {
			p.final = keepTail(t, maxMessageBytes)
			p.completed = true
		}
		if t != "" && !p.sawText {
			return textDisplay(t)
		}
	case "result":
		// "-o json" prints one result object shaped like Claude's.
		if o.boolean("is_error") {
			return p.errorLine(o.firstStr("result", "error", "subtype"))
		}
		if u := o.obj("usage"); u != nil {
			p.res.Usage = p.res.Usage.Add(anthropicUsage(u))
		}
		t, ok := o["result"].(string)
		if ok {
			p.final = keepTail(t, maxMessageBytes)
			p.completed = true
		}
		if t != "" && !p.sawText {
			return textDisplay(t)
		}
	case "error":
		return p.errorLine(o.firstStr("message", "error"))
	}
	return ""
}

func (p *droidParser) Result() Result {
	if p.completed {
		return p.result(p.final)
	}
	return p.result(p.lastText)
}
