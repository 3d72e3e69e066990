package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/report"
)

// events is GET /api/events: the journal as Server-Sent Events. Each
// event is
//
//	id: <seq>
//	event: <kind>
//	data: <the envelope as one line of JSON>
//
// It replays the events after Last-Event-ID (the header a reconnecting
// EventSource sends) or ?after=, or all, then follows the journal.
func (s *Server) events(w http.ResponseWriter, r *http.Request, ws Workspace) {
	after, err := afterOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Anyone who can reach the address may open a stream (a web page
	// can, at 127.0.0.1): how many are open at once is bounded.
	if s.streams.Add(1) > maxStreams {
		s.streams.Add(-1)
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("%d event streams are open, the most this server keeps: close a dashboard and try again", maxStreams))
		return
	}
	defer s.streams.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)

	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	// The heartbeat must be done writing before the handler returns:
	// a ResponseWriter is not to be used after that.
	defer wg.Wait()
	defer cancel()
	var mu sync.Mutex // the heartbeat and the events write to one stream
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		// A client that stops reading is let go, not waited for; its
		// browser comes back with Last-Event-ID.
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	// A second is quick enough to come back after a restart of serve
	// and slow enough not to hammer it while it is down.
	if write([]byte("retry: 1000\n\n")) != nil {
		return
	}
	wg.Go(func() {
		t := time.NewTicker(s.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if write([]byte(": heartbeat\n\n")) != nil {
					cancel()
					return
				}
			}
		}
	})
	if h := s.hubs[ws.Name]; h != nil {
		h.stream(ctx, after, write)
		return
	}
	ws.Source.Events(ctx, after, func(ev report.Event) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return nil // an Event always marshals; Data holds plain values only
		}
		return write(fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, sseField(string(ev.Kind)), b))
	})
}

const (
	// maxStreams is how many event streams a server keeps open at once.
	maxStreams = 64
	// writeTimeout is how long a client may take to take one write.
	writeTimeout = 30 * time.Second
)

// afterOf is the seq a stream starts after: Last-Event-ID wins over
// ?after=, because it is where this very client got to.
func afterOf(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	name := "the Last-Event-ID header"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "?after="
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is %q: give the seq of the last event seen (a number, 0 for all)", name, v)
	}
	return n, nil
}

// sseField keeps a value on its one line: a newline would end the field.
func sseField(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
