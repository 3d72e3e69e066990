package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/rogpeppe/go-internal/testscript"
)

// withCmds adds this package's own script commands to p.
func withCmds(p testscript.Params) testscript.Params {
	if p.Cmds == nil {
		p.Cmds = map[string]func(*testscript.TestScript, bool, []string){}
	}
	p.Cmds["validjson"] = cmdValidJSON
	p.Cmds["httpserve"] = cmdHTTPServe
	return p
}

// cmdHTTPServe starts an HTTP server on the loopback that answers every
// request with BODY, for the script's life: httpserve NAME BODY. It sets
// NAME_URL (http://127.0.0.1:PORT) and NAME_ADDR (127.0.0.1:PORT).
func cmdHTTPServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: httpserve NAME BODY")
	}
	body := args[1]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	ts.Defer(srv.Close)
	ts.Setenv(args[0]+"_URL", srv.URL)
	ts.Setenv(args[0]+"_ADDR", srv.Listener.Addr().String())
}

// cmdValidJSON fails unless a file holds exactly one JSON document, or with
// -lines, one JSON document on each line: validjson [-lines] FILE. FILE may
// be stdout or stderr, the last command's output. It checks what a program
// reading ralph's --json output would parse.
func cmdValidJSON(ts *testscript.TestScript, neg bool, args []string) {
	lines := len(args) == 2 && args[0] == "-lines"
	if lines {
		args = args[1:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: validjson [-lines] FILE")
	}
	data := ts.ReadFile(args[0])
	err := checkJSON([]byte(data), lines)
	switch {
	case neg && err == nil:
		ts.Fatalf("%s is valid JSON", args[0])
	case !neg && err != nil:
		ts.Fatalf("%s is not valid JSON: %v\n%s", args[0], err, data)
	}
}

func checkJSON(data []byte, lines bool) error {
	if !lines {
		return oneDocument(data)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	n := 0
	for sc.Scan() {
		n++
		if err := oneDocument(sc.Bytes()); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	if n == 0 {
		return errors.New("no JSON lines")
	}
	return sc.Err()
}

// oneDocument fails unless data is one JSON value with nothing but white
// space around it: text printed before or after the JSON breaks a parser.
func oneDocument(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more after the JSON document")
	}
	return nil
}
