package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// DefaultMaxFrame bounds one line of input (one JSON-RPC message): every
// tool's arguments are a few short strings, so a megabyte is far more
// than a client needs and little enough to hold in memory.
const DefaultMaxFrame = 1 << 20

// The JSON-RPC error codes ralph answers a bad line with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// lockedWriter serialises whole-line writes of the SDK and of the frame
// filter, so that an error reply never lands inside an answer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// filterFrames copies the lines of in that are JSON-RPC messages to
// good and answers every other line itself on out, with the JSON-RPC
// error a client can act on: the SDK ends the whole session on the first
// line it cannot decode, and every later call would go unanswered. A line
// longer than max is answered as too large and skipped to its end,
// without being held in memory. good is closed when in ends.
func filterFrames(in io.Reader, good *io.PipeWriter, out io.Writer, max int) {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	for {
		line = line[:0]
		tooLong := false
		n := 0 // bytes of the line, kept or not
		var err error
		for {
			var chunk []byte
			chunk, err = r.ReadSlice('\n')
			n += len(chunk)
			if !tooLong {
				if n > max+2 { // room for "\r\n"
					tooLong, line = true, line[:0]
				} else {
					line = append(line, chunk...)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if tooLong {
			reply(out, nil, codeInvalidRequest, fmt.Sprintf("message too large: more than %d bytes on one line; send each message on its own line, within %d bytes", max, max))
		} else if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if id, code, text, ok := check(msg); !ok {
				reply(out, id, code, text)
			} else if _, werr := good.Write(append(msg, '\n')); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				good.Close()
			} else {
				good.CloseWithError(err)
			}
			return
		}
	}
}

// check says whether msg is one JSON-RPC message the SDK can take, and
// if not, the id (when it can be told), code and message to answer with.
func check(msg []byte) (id json.RawMessage, code int, text string, ok bool) {
	if !json.Valid(msg) {
		return nil, codeParseError, "parse error: the line is not JSON; send one JSON-RPC message per line", false
	}
	if msg[0] == '[' {
		// Batches left the protocol in 2025-06-18, and the SDK ends
		// the session on one for a client that negotiated a later
		// version: answer it here whatever the version.
		return nil, codeInvalidRequest, "invalid request: batches are not supported; send one message per line", false
	}
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if msg[0] != '{' || json.Unmarshal(msg, &head) != nil {
		return nil, codeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object", false
	}
	if len(head.ID) > 0 {
		switch head.ID[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			id = head.ID
		default:
			return nil, codeInvalidRequest, "invalid request: the id must be a string, a number or null", false
		}
	}
	if _, err := jsonrpc.DecodeMessage(msg); err != nil {
		return id, codeInvalidRequest, "invalid request: " + err.Error(), false
	}
	return nil, 0, "", true
}

// reply writes one JSON-RPC error response on out.
func reply(out io.Writer, id json.RawMessage, code int, text string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, text}})
	if err != nil {
		return
	}
	_, _ = out.Write(append(b, '\n'))
}
