package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// Remote is a workspace that another ralph serves (`ralph serve`), seen
// through its JSON API: /api/status, the journal as Server-Sent Events,
// and /api/control. The same views work on it as on a Local workspace, so
// `ralph watch --url` follows a run on another machine.
type Remote struct {
	// Base is the server's address, such as http://10.0.0.5:7777.
	Base string
	// Workspace names one of the server's workspaces; "" is its first.
	Workspace string
	// Token is the control token; reading needs none.
	Token string
	// Client makes the requests; nil means a client without a timeout
	// (the event stream lasts), each request bounded by its context.
	Client *http.Client
	// Retry is how long a broken event stream waits before it asks
	// again; 0 means a second.
	Retry time.Duration
}

// ParseRemote reads the address `ralph serve` printed, token fragment
// and all: http://127.0.0.1:7777/#token=... gives the base and the token.
func ParseRemote(raw string) (*Remote, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not the address of a ralph serve: give it as ralph serve printed it, such as http://127.0.0.1:7777/#token=...", raw)
	}
	r := &Remote{}
	if frag, _ := url.ParseQuery(u.Fragment); frag.Get("token") != "" {
		r.Token = frag.Get("token")
	}
	r.Workspace = u.Query().Get("ws")
	if name, ok := strings.CutPrefix(strings.Trim(u.Path, "/"), "w/"); ok {
		r.Workspace = name
	}
	u.Path, u.RawQuery, u.Fragment = "", "", ""
	r.Base = u.String()
	return r, nil
}

// Name implements Source.
func (r *Remote) Name() string {
	if r.Workspace != "" {
		return r.Base + " (" + r.Workspace + ")"
	}
	return r.Base
}

func (r *Remote) client() *http.Client {
	if r.Client != nil {
		return r.Client
	}
	return http.DefaultClient
}

// url is the address of an API path for the workspace.
func (r *Remote) url(path string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	if r.Workspace != "" {
		q.Set("ws", r.Workspace)
	}
	s := strings.TrimRight(r.Base, "/") + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// Status implements Source.
func (r *Remote) Status(ctx context.Context) (status.Report, error) {
	var rep status.Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url("/api/status", nil), nil)
	if err != nil {
		return rep, err
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", r.Base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, apiError(resp)
	}
	return rep, json.NewDecoder(resp.Body).Decode(&rep)
}

// Events implements Source. A stream that breaks (the server restarted,
// the network dropped) is asked again after the last event it gave, so
// no event is missed or given twice.
func (r *Remote) Events(ctx context.Context, after int64, fn func(report.Event) error) error {
	retry := r.Retry
	if retry == 0 {
		retry = time.Second
	}
	for {
		err := r.stream(ctx, &after, fn)
		var fnErr *callbackError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// callbackError is fn's own error, which ends Events.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// stream reads one event stream until it ends, moving *after along.
func (r *Remote) stream(ctx context.Context, after *int64, fn func(report.Event) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url("/api/events", nil), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	resp, err := r.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20) // an agent's line can be long
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && data.Len() > 0:
			ev, ok := report.ParseLine(data.Bytes())
			data.Reset()
			if !ok || ev.Seq <= *after {
				continue
			}
			if err := fn(ev); err != nil {
				return &callbackError{err}
			}
			*after = ev.Seq
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// Steer implements Source: the command goes to /api/control with the
// token. The server says who gave it ("web") and when.
func (r *Remote) Steer(ctx context.Context, cmd control.Command) (control.Result, error) {
	var res control.Result
	body, err := json.Marshal(cmd)
	if err != nil {
		return res, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url("/api/control", nil), bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return res, fmt.Errorf("%s: %w", r.Base, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return res, json.NewDecoder(resp.Body).Decode(&res)
	case http.StatusBadRequest:
		return res, &control.InputError{Msg: apiError(resp).Error()}
	case http.StatusUnauthorized:
		if r.Token == "" {
			return res, errors.New("this ralph serve takes commands only with its token: give the address it printed, with #token=..., or --token-file")
		}
	}
	return res, apiError(resp)
}

// apiError is the message of a failed API call: the server's own words
// when it gave any.
func apiError(resp *http.Response) error {
	var e struct {
		Error string `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return fmt.Errorf("%s %s: %s", resp.Request.Method, resp.Request.URL.Path, resp.Status)
}
