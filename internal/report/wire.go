package report

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/ralphloop/ralph/internal/redact"
)

// Other is data this release has no type for: a kind a newer ralph
// writes, or data of a known kind that does not fit its type (an older
// ralph's). It is kept as read, so that an event passed on (`ralph mcp`,
// the dashboard) says what its journal line said.
type Other struct {
	Of  Kind
	Raw json.RawMessage
}

// Kind implements Payload.
func (o Other) Kind() Kind { return o.Of }

// MarshalJSON writes the data as read.
func (o Other) MarshalJSON() ([]byte, error) { return o.Raw, nil }

func decodeAs[T Payload](raw []byte) (Payload, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// plain is Event without its JSON methods.
type plain Event

// wire is an event as JSON read: its data as the object it is.
type wire struct {
	plain
	Data json.RawMessage `json:"data,omitempty"`
}

// MarshalJSON writes the envelope with the payload as its "data" object,
// and the keys a reader kept (unknown ones, origin_run) in it.
func (ev Event) MarshalJSON() ([]byte, error) {
	data, err := ev.dataJSON()
	if err != nil {
		return nil, err
	}
	p := plain(ev)
	p.Data = nil
	if data != nil {
		p.Data = Other{Raw: data}
	}
	return json.Marshal(p)
}

// dataJSON is the data object with its keys sorted, as the maps of the
// release before typed payloads wrote them; nil when it has none.
func (ev Event) dataJSON() ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if ev.Data != nil {
		b, err := json.Marshal(ev.Data)
		if err != nil {
			return nil, err
		}
		if json.Unmarshal(b, &fields) != nil {
			return b, nil // data that is not an object keeps no more keys
		}
	}
	for k, v := range ev.extra {
		if _, ok := fields[k]; !ok {
			fields[k] = v
		}
	}
	if ev.OriginRun != "" {
		fields["origin_run"], _ = json.Marshal(ev.OriginRun)
	}
	if len(fields) == 0 {
		return nil, nil // no facts: no data, as an empty map had none
	}
	return json.Marshal(fields)
}

// UnmarshalJSON reads an event, its data into its kind's payload. Keys
// the payload does not hold are kept and written back by MarshalJSON;
// data of an unknown kind, or that does not fit its kind's type, is kept
// whole as Other.
func (ev *Event) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*ev = Event(w.plain)
	ev.Data, ev.OriginRun, ev.extra = decodeData(ev.Kind, w.Data)
	return nil
}

func decodeData(kind Kind, raw json.RawMessage) (p Payload, origin string, extra map[string]json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return Other{Of: kind, Raw: raw}, "", nil
	}
	if o, ok := fields["origin_run"]; ok && json.Unmarshal(o, &origin) == nil && origin != "" {
		delete(fields, "origin_run")
		raw, _ = json.Marshal(fields)
	} else {
		origin = ""
	}
	decode := payloads[kind]
	if decode == nil {
		return Other{Of: kind, Raw: raw}, origin, nil
	}
	p, err := decode(raw)
	if err != nil {
		return Other{Of: kind, Raw: raw}, origin, nil
	}
	// The keys the payload writes back itself are its own; the rest (a
	// newer ralph's, or a zero an older one wrote) are kept.
	var known map[string]json.RawMessage
	if b, err := json.Marshal(p); err == nil {
		json.Unmarshal(b, &known)
	}
	for k, v := range fields {
		if _, ok := known[k]; !ok {
			if extra == nil {
				extra = map[string]json.RawMessage{}
			}
			extra[k] = v
		}
	}
	return p, origin, extra
}

// redactEvent masks secrets in every text of ev, so that no sink (the
// journal, the terminal, the web page, a notifier) and no state that
// records the event holds one: an event can carry text that never went
// through the agent's redacted output, such as a PRD criterion that
// quotes a secret.
func redactEvent(ev *Event) {
	red := redact.Default()
	ev.Text, ev.Task, ev.Trigger = red.Redact(ev.Text), red.Redact(ev.Task), red.Redact(ev.Trigger)
	if ev.Data != nil {
		b, err := json.Marshal(ev.Data)
		if masked := red.JSON(b); err == nil && !bytes.Equal(masked, b) {
			ev.Data, _, _ = decodeData(ev.Data.Kind(), masked)
		}
	}
	if len(ev.extra) > 0 {
		extra := maps.Clone(ev.extra)
		for k, v := range extra {
			extra[k] = red.JSON(v)
		}
		ev.extra = extra
	}
}
