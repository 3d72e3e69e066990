package report

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Header is a journal line's envelope without its data and text: what a
// view needs of the lines it only counts or times (agent output and
// heartbeats are most of a journal).
type Header struct {
	V      int       `json:"v"`
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Run    string    `json:"run"`
	Worker string    `json:"worker"`
	Task   string    `json:"task"`
	Kind   Kind      `json:"kind"`
}

var kindKey = []byte(`"kind":"`)

// ReadHeader reads a journal line's envelope. The journal's lines are
// Events written by encoding/json, which puts the envelope's fields in
// their declared order, before data and text, and escapes every quote
// inside a string: the first `"kind":"` of a line is the envelope's, and
// the fields before it are read by their keys without decoding the rest
// (a 60 MB journal's receipts cost 2.9 s of json.Unmarshal before). A
// line this cannot read so (an escape in the envelope, another writer's
// field order) is decoded with encoding/json. ok is false for what is not
// an event of a known schema version.
func ReadHeader(line []byte) (h Header, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Header{}, false
	}
	if h, ok, sure := readHeaderFast(line); sure {
		return h, ok
	}
	if json.Unmarshal(line, &h) != nil || h.V <= 0 || h.V > SchemaVersion {
		return Header{}, false
	}
	return h, true
}

// readHeaderFast reads the envelope by its keys; sure is false when the
// line must be decoded instead.
func readHeaderFast(line []byte) (h Header, ok, sure bool) {
	k := bytes.Index(line, kindKey)
	if k < 0 {
		return Header{}, false, false
	}
	head := line[:k]
	if bytes.IndexByte(head, '\\') >= 0 || !bytes.HasPrefix(head, []byte(`{"v":`)) {
		return Header{}, false, false
	}
	rest := line[k+len(kindKey):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return Header{}, false, false
	}
	h.Kind = Kind(rest[:end])
	v, okV := number(head, `"v":`)
	seq, okSeq := number(head, `"seq":`)
	ts, okT := str(head, `"time":"`)
	if !okV || !okSeq || !okT {
		return Header{}, false, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Header{}, false, false
	}
	h.V, h.Seq, h.Time = int(v), seq, t
	h.Run, _ = str(head, `"run":"`)
	h.Worker, _ = str(head, `"worker":"`)
	h.Task, _ = str(head, `"task":"`)
	if h.V <= 0 || h.V > SchemaVersion {
		return Header{}, false, true
	}
	// The rest of the line is not checked: the journal's readers hand on
	// only lines that ended in a newline, which ralph writes whole. One
	// that does not even end as an object is decoded, and refused.
	if line[len(line)-1] != '}' {
		return Header{}, false, false
	}
	return h, true, true
}

// str is the string value after key in an envelope without escapes.
func str(head []byte, key string) (string, bool) {
	i := bytes.Index(head, []byte(key))
	if i < 0 {
		return "", false
	}
	v := head[i+len(key):]
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return "", false
	}
	return string(v[:end]), true
}

// number is the integer value after key.
func number(head []byte, key string) (int64, bool) {
	i := bytes.Index(head, []byte(key))
	if i < 0 {
		return 0, false
	}
	v := head[i+len(key):]
	end := 0
	for end < len(v) && (v[end] == '-' || v[end] >= '0' && v[end] <= '9') {
		end++
	}
	n, err := strconv.ParseInt(string(v[:end]), 10, 64)
	return n, err == nil
}
