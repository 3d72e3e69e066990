package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/report"
)

// The journal keeps every line of agent output: hundreds of megabytes.
// A hub follows one workspace's journal for all its event streams, so
// that a stream costs neither a copy of the journal nor a poll and a
// parse of every line of its own:
//
//   - one goroutine per journal reads what is appended, parses each line
//     once and keeps the last ringBytes of them as ready frames, shared;
//   - a stream sends from those frames; one that fell behind them (a
//     replay, a slow reader) reads the file itself, a piece at a time,
//     starting at a mark of the hub's index near the seq it resumes
//     after, and at most replaySlots streams read the file at once;
//   - nothing ever waits for a stream: the hub wakes the streams and goes
//     on, so a slow client slows only itself.
const (
	markEvery   = 1 << 20
	replaySlots = 2
	// replayPiece is how much of the file a stream reads per turn of
	// a replay slot.
	replayPiece = 256 << 10
)

// ringBytes is how many bytes of frames a hub keeps ready; a variable for
// the tests, which follow a journal longer than the ring without writing
// megabytes.
var ringBytes = 4 << 20

// frame is one event, ready to send.
type frame struct {
	start, end int64 // the line's place in the journal
	seq        int64
	b          []byte
}

// mark says that every line before off has a seq of at most seq.
type mark struct{ off, seq int64 }

type hub struct {
	path string
	poll time.Duration
	// ringMax is how many bytes of frames the ring keeps.
	ringMax int
	// replay bounds how many streams read the file at once.
	replay chan struct{}

	// reading is held by the follower reading the journal: a follower
	// stopped as its last stream left may still be reading when the
	// next stream starts another.
	reading sync.Mutex

	mu       sync.Mutex
	end      int64   // read to here: the end of the last whole line
	gen      int     // bumped when the journal was replaced (shrank)
	maxSeq   int64   // the highest seq before end
	marks    []mark  // one every markEvery bytes
	ring     []frame // the frames of [ringFrom, end), oldest first
	ringFrom int64
	ringSize int
	wake     chan struct{} // closed when the journal grows
	ready    chan struct{} // closed when the journal was first read
	once     sync.Once
	err      error
	streams  int
	stop     context.CancelFunc
}

func newHub(path string, poll time.Duration, replay chan struct{}) *hub {
	return &hub{path: path, poll: poll, ringMax: ringBytes, replay: replay, wake: make(chan struct{}), ready: make(chan struct{})}
}

// join starts following the journal for one more stream; leave ends it.
func (h *hub) join() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams++
	if h.streams == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		h.stop = cancel
		go h.follow(ctx)
	}
}

func (h *hub) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams--
	if h.streams == 0 {
		h.stop()
	}
}

func (h *hub) follow(ctx context.Context) {
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		h.read()
		h.once.Do(func() { close(h.ready) })
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// read takes in what was appended since the last read.
func (h *hub) read() {
	h.reading.Lock()
	defer h.reading.Unlock()
	f, err := os.Open(h.path)
	if os.IsNotExist(err) {
		err = nil
	}
	if err != nil {
		h.fail(err)
		return
	}
	if f == nil {
		return // no journal yet
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		h.fail(err)
		return
	}
	h.mu.Lock()
	from := h.end
	if fi.Size() < from {
		// Replaced: read again from the start.
		h.gen++
		h.end, h.maxSeq, h.marks, h.ring, h.ringFrom, h.ringSize, from = 0, 0, nil, nil, 0, 0, 0
	}
	h.mu.Unlock()
	if fi.Size() == from {
		return
	}
	// Lines far from the end are only indexed; the rest become frames.
	framesFrom := max(from, fi.Size()-int64(h.ringMax))
	var batch []frame
	maxSeq, lastMark := h.maxSeq, from
	if n := len(h.marks); n > 0 {
		lastMark = h.marks[n-1].off
	}
	var marks []mark
	end, err := report.ScanLines(f, from, fi.Size(), func(line []byte, end int64) error {
		start := end - int64(len(line)) - 1
		if start < framesFrom {
			maxSeq = max(maxSeq, quickSeq(line))
		} else if fr, ok := newFrame(line, start, end); ok {
			maxSeq = max(maxSeq, fr.seq)
			batch = append(batch, fr)
		}
		if end-lastMark >= markEvery {
			marks = append(marks, mark{off: end, seq: maxSeq})
			lastMark = end
		}
		return nil
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
	if len(h.ring) == 0 || framesFrom > from {
		// The frames start anew: what lies before them, streams read
		// from the file.
		h.ring, h.ringSize, h.ringFrom = nil, 0, end
		if len(batch) > 0 {
			h.ringFrom = batch[0].start
		}
	}
	h.end, h.maxSeq = end, maxSeq
	h.marks = append(h.marks, marks...)
	for _, fr := range batch {
		h.ring = append(h.ring, fr)
		h.ringSize += len(fr.b)
	}
	// Keep the ring to its size: the oldest frames go.
	drop := 0
	for h.ringSize > h.ringMax && drop < len(h.ring)-1 {
		h.ringSize -= len(h.ring[drop].b)
		h.ringFrom = h.ring[drop].end
		drop++
	}
	if drop > 0 {
		h.ring = append([]frame(nil), h.ring[drop:]...)
	}
	if len(h.ring) == 0 {
		h.ringFrom = end
	}
	close(h.wake)
	h.wake = make(chan struct{})
}

func (h *hub) fail(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

// newFrame is the SSE frame of one journal line.
func newFrame(line []byte, start, end int64) (frame, bool) {
	ev, ok := report.ParseLine(line)
	if !ok {
		return frame{}, false
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return frame{}, false // an Event always marshals; Data holds plain values only
	}
	return frame{start: start, end: end, seq: ev.Seq, b: fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, sseField(string(ev.Kind)), b)}, true
}

// quickSeq is the seq of a line as ralph writes it ({"v":1,"seq":N,...),
// read without parsing the line; another shape is parsed.
func quickSeq(line []byte) int64 {
	if rest, ok := bytes.CutPrefix(line, []byte(`{"v":`)); ok {
		if i := bytes.IndexByte(rest, ','); i > 0 {
			if rest, ok := bytes.CutPrefix(rest[i+1:], []byte(`"seq":`)); ok {
				j := bytes.IndexAny(rest, ",}")
				if j > 0 {
					if n, err := strconv.ParseInt(string(rest[:j]), 10, 64); err == nil {
						return n
					}
				}
			}
		}
	}
	ev, _ := report.ParseLine(line)
	return ev.Seq
}

// stream sends every event whose seq is greater than after, then each
// new one, until ctx ends (nil) or send fails (its error).
func (h *hub) stream(ctx context.Context, after int64, send func([]byte) error) error {
	h.join()
	defer h.leave()
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil
	}
	h.mu.Lock()
	gen := h.gen
	off := int64(0)
	// Every line before the last mark whose seqs are all at most after
	// has nothing to send.
	i := sort.Search(len(h.marks), func(i int) bool { return h.marks[i].seq > after })
	if i > 0 {
		off = h.marks[i-1].off
	}
	h.mu.Unlock()
	for {
		h.mu.Lock()
		if h.gen != gen {
			gen, off = h.gen, 0
		}
		if h.err != nil {
			err := h.err
			h.mu.Unlock()
			return err
		}
		end, ringFrom, wake := h.end, h.ringFrom, h.wake
		var frames []frame
		if off >= ringFrom {
			k := sort.Search(len(h.ring), func(k int) bool { return h.ring[k].start >= off })
			frames = append(frames, h.ring[k:min(len(h.ring), k+256)]...)
		}
		h.mu.Unlock()
		switch {
		case off < ringFrom:
			// Behind the frames: read the file up to them.
			var err error
			if frames, err = h.readFile(ctx, off, ringFrom); err != nil {
				return err
			}
			if len(frames) == 0 {
				off = ringFrom
			}
		case len(frames) == 0 && off >= end:
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
			}
			continue
		case len(frames) == 0:
			off = end // lines of no event (older shapes)
		}
		for _, fr := range frames {
			off = fr.end
			if fr.seq <= after {
				continue
			}
			if err := send(fr.b); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// readFile reads up to a piece of the journal between off and to as
// frames, when a replay slot is free.
func (h *hub) readFile(ctx context.Context, off, to int64) ([]frame, error) {
	select {
	case h.replay <- struct{}{}:
	case <-ctx.Done():
		return nil, nil
	}
	defer func() { <-h.replay }()
	f, err := os.Open(h.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var frames []frame
	_, err = report.ScanLines(f, off, to, func(line []byte, end int64) error {
		if fr, ok := newFrame(line, end-int64(len(line))-1, end); ok {
			frames = append(frames, fr)
		} else {
			// A line of no event still moves the stream on.
			frames = append(frames, frame{start: end - int64(len(line)) - 1, end: end, seq: -1})
		}
		if end-off >= replayPiece {
			return errPiece
		}
		return nil
	})
	if err == errPiece {
		err = nil
	}
	return frames, err
}

var errPiece = fmt.Errorf("a piece read")
