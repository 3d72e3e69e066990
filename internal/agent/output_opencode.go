package agent

// opencodeParser reads "opencode run --format json" events.
//
// opencode reports a run as steps: step_start, then text and tool_use parts,
// then step_finish. The final message is the text parts of the last step,
// concatenated, so that narration from an earlier step (one that ended in
// tool calls) does not count. Tool output lives in tool_use parts and is
// never read as text.
type opencodeParser struct {
	base

	stepText tailBuffer
	calls    map[string]bool // callIDs counted in the current step
}

func (p *opencodeParser) Line(line []byte) string {
	o, text := jsonLine(line)
	if o == nil {
		return text
	}
	p.setSession(o.str("sessionID"))
	part := o.obj("part")
	switch o.str("type") {
	case "step_start":
		p.stepText.reset()
		clear(p.calls)
	case "text":
		t := part.str("text")
		if t == "" {
			return ""
		}
		p.stepText.add(t, "\n")
		return textDisplay(t)
	case "tool_use":
		// opencode reports a call once it has finished; the callID guard
		// keeps a repeated report from counting twice.
		if id := part.str("callID"); id != "" {
			if p.calls[id] {
				return ""
			}
			if len(p.calls) >= maxOpenCalls {
				clear(p.calls)
			}
			p.calls[id] = true
		}
		p.res.ToolCalls++
		return toolLine(part.str("tool"), part.obj("state")["input"])
	case "step_finish":
		tok := part.obj("tokens")
		cache := tok.obj("cache")
		p.res.Usage = p.res.Usage.Add(Usage{
			InputTokens:      tok.integer("input"),
			OutputTokens:     tok.integer("output"),
			CacheReadTokens:  cache.integer("read"),
			CacheWriteTokens: cache.integer("write"),
		})
		if v, ok := part.num("cost"); ok {
			p.res.CostUSD += v
			p.res.CostKnown = true
		}
	case "error":
		return p.error(o.obj("error"))
	}
	return ""
}

// error records an error event. An HTTP 429 from the provider, which
// opencode reports after its own retries, is a rate limit.
func (p *opencodeParser) error(e jobj) string {
	p.res.IsError = true
	data := e.obj("data")
	name := e.str("name")
	msg := data.firstStr("message")
	if msg == "" {
		msg = e.str("message")
	}
	switch {
	case msg == "":
		msg = name
	case name != "" && name != "UnknownError":
		msg = name + ": " + msg
	}
	if msg == "" {
		msg = "unknown error"
	}
	p.addError(msg)
	if status, _ := data.num("statusCode"); status == 429 {
		p.setLimit(Limit{
			Kind:     "rate_limit",
			Message:  msg,
			ResetsAt: retryAfter(data.obj("responseHeaders"), p.now()),
		})
		return limitDisplay(p.res.Limit)
	}
	return "error: " + oneLine(msg, 0)
}

func (p *opencodeParser) Result() Result {
	return p.result(p.stepText.String())
}
