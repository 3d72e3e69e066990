package agent

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// claudeParser reads Claude Code's "--output-format stream-json --verbose"
// events. Amp's --stream-json uses the same envelope and is read by it too.
//
// The final message is result.result when a successful result event exists,
// because that is the CLI's own statement of the run's answer; otherwise it
// is the text of the last top-level assistant message after its last tool
// call. Tool results arrive in "user" events and are never read.
type claudeParser struct {
	base

	msgID      string     // id of the last top-level assistant message
	msgText    tailBuffer // its text since its last tool call; Claude sends one event per content block
	resultText string
	haveResult bool // a successful result event with a result text was seen
	sawText    bool // assistant text has been shown

	// Amp reports usage only per assistant message, and Claude repeats a
	// message's usage on each of its content block events, so the usage of
	// the current message is held apart and added once the next one starts.
	msgUsage, closedUsage Usage
	resultUsage           bool // a result event carried usage; it wins
}

func (p *claudeParser) Line(line []byte) string {
	o, text := jsonLine(line)
	if o == nil {
		return text
	}
	p.setSession(o.str("session_id"))
	switch o.str("type") {
	case "system":
		return p.system(o)
	case "assistant":
		return p.assistant(o)
	case "rate_limit_event":
		return p.rateLimit(o.obj("rate_limit_info"))
	case "result":
		return p.resultEvent(o)
	}
	// "user" carries tool results and replayed prompts; "stream_event"
	// carries partial deltas that a full "assistant" event repeats.
	return ""
}

func (p *claudeParser) system(o jobj) string {
	switch o.str("subtype") {
	case "api_retry":
		attempt := o.integer("attempt")
		max := o.integer("max_retries")
		status := o.integer("error_status")
		msg := fmt.Sprintf("retrying API request (attempt %d of %d", attempt, max)
		if status != 0 {
			msg += fmt.Sprintf(", status %d", status)
		}
		if e := o.str("error"); e != "" {
			msg += ", " + oneLine(e, 80)
		}
		return msg + ")"
	}
	return ""
}

func (p *claudeParser) assistant(o jobj) string {
	msg := o.obj("message")
	// A message from a subagent (Task tool) is tool output from the main
	// agent's point of view: its tool calls count and show, but its text is
	// never the final message.
	sub := o.str("parent_tool_use_id") != ""
	if !sub {
		if id := msg.str("id"); id == "" || id != p.msgID {
			p.msgID = id
			p.msgText.reset()
			p.closedUsage = p.closedUsage.Add(p.msgUsage)
			p.msgUsage = Usage{}
		}
		if u := msg.obj("usage"); u != nil {
			p.msgUsage = anthropicUsage(u)
			p.res.ContextTokens = p.msgUsage.InputTokens + p.msgUsage.CacheReadTokens + p.msgUsage.CacheWriteTokens
		}
	}
	var show []string
	for _, b := range contentBlocks(msg) {
		switch b.str("type") {
		case "text":
			t := b.str("text")
			if t == "" || sub {
				continue
			}
			p.msgText.add(t, "\n")
			p.sawText = true
			show = append(show, textDisplay(t))
		case "tool_use", "server_tool_use":
			p.res.ToolCalls++
			show = append(show, toolLine(b.str("name"), b["input"]))
			if !sub {
				// Text before a tool call is narration: the agent went on
				// working after it, so it is not the final answer.
				p.msgText.reset()
			}
		}
	}
	return joinDisplay(show...)
}

// contentBlocks returns the content blocks of an Anthropic-shaped message.
// A plain string content is one text block.
func contentBlocks(msg jobj) []jobj {
	if s := msg.str("content"); s != "" {
		return []jobj{{"type": "text", "text": s}}
	}
	var out []jobj
	for _, c := range msg.arr("content") {
		if m, ok := c.(map[string]any); ok {
			out = append(out, jobj(m))
		}
	}
	return out
}

func (p *claudeParser) rateLimit(info jobj) string {
	status := info.str("status")
	kind := info.firstStr("rateLimitType", "rate_limit_type")
	switch status {
	case "rejected":
		// Past the plan's limit but allowed to draw on extra usage, the
		// run goes on; a real refusal still ends in a 429 result.
		if info.boolean("isUsingOverage") {
			return "warning: the " + cmp.Or(kind, "plan") + " limit is reached; using extra usage"
		}
		l := Limit{Kind: cmp.Or(kind, "rate_limit"), Message: cmp.Or(kind, "usage") + " limit reached"}
		if v, ok := info.num("resetsAt"); ok && v > 0 && v < 1<<40 { // epoch seconds
			l.ResetsAt = time.Unix(int64(v), 0).In(p.now().Location())
		}
		p.setLimit(l)
		return limitDisplay(p.res.Limit)
	case "allowed_warning":
		if kind == "" {
			return "warning: approaching a usage limit"
		}
		return "warning: approaching the " + kind + " usage limit"
	}
	return ""
}

func (p *claudeParser) resultEvent(o jobj) string {
	text := o.str("result")
	subtype := o.str("subtype")
	isErr := o.boolean("is_error") || strings.HasPrefix(subtype, "error")
	if u := o.obj("usage"); u != nil {
		p.res.Usage = p.res.Usage.Add(anthropicUsage(u))
		p.resultUsage = true
	}
	if v, ok := o.num("total_cost_usd"); ok {
		p.res.CostUSD += v
		p.res.CostKnown = true
	}
	p.res.PermissionDenials += len(o.arr("permission_denials"))
	for _, m := range o.obj("modelUsage") {
		if mu, ok := m.(map[string]any); ok {
			if w := jobj(mu).integer("contextWindow"); w > p.res.ContextWindow {
				p.res.ContextWindow = w
			}
		}
	}

	var out []string
	if status, _ := o.num("api_error_status"); status == 429 {
		if p.setLimit(Limit{Kind: "rate_limit", Message: text}) {
			out = append(out, limitDisplay(p.res.Limit))
		}
	}
	if !isErr {
		if _, ok := o["result"].(string); ok {
			p.resultText = keepTail(text, maxMessageBytes)
			p.haveResult = true
		}
		// With --output-format json there are no assistant events, so the
		// answer has not been shown yet.
		if text != "" && !p.sawText {
			out = append([]string{textDisplay(text)}, out...)
		}
		return joinDisplay(out...)
	}
	p.res.IsError = true
	for _, e := range o.arr("errors") {
		if s, ok := e.(string); ok {
			p.addError(s)
		}
	}
	msg := text
	if msg == "" {
		msg = o.str("error")
	}
	if msg == "" {
		msg = subtype
	}
	if p.addError(msg) && len(out) == 0 && !p.msgText.equal(msg) {
		out = append(out, "error: "+oneLine(msg, 0))
	}
	return joinDisplay(out...)
}

func (p *claudeParser) Result() Result {
	final := p.msgText.String()
	if p.haveResult {
		final = p.resultText
	}
	r := p.result(final)
	if !p.resultUsage {
		r.Usage = p.closedUsage.Add(p.msgUsage)
	}
	return r
}

// anthropicUsage reads an Anthropic-shaped usage object, which Claude, Amp
// and droid share. Codex's cached/cache-write names are accepted as well.
func anthropicUsage(u jobj) Usage {
	return Usage{
		InputTokens:      u.integer("input_tokens"),
		OutputTokens:     u.integer("output_tokens"),
		CacheReadTokens:  u.integer("cache_read_input_tokens", "cached_input_tokens"),
		CacheWriteTokens: u.integer("cache_creation_input_tokens", "cache_write_input_tokens"),
	}
}
