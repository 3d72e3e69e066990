package agent

import (
	"fmt"
	"io"
)

// DefaultMaxLogBytes bounds one raw agent log when nothing else is
// configured ([agent] max_log_bytes).
const DefaultMaxLogBytes = 50 << 20

// headTailWriter keeps the first and the last half of max bytes of what is
// written to it: an agent that prints gigabytes would otherwise fill the
// disk with one iteration's log. The head passes straight through; the
// tail waits in a ring buffer until Close, which writes a line saying how
// much was cut and then the tail. The start of a log says what the agent
// set out to do and its end holds the final message, so both are kept.
type headTailWriter struct {
	w        io.Writer
	headLeft int64
	// ring holds the tail; it grows as output arrives, up to size, so a
	// short run never allocates the whole tail (25 MB by default).
	ring      []byte
	size      int
	next      int   // where the next tail byte goes in ring
	full      bool  // ring has wrapped at least once
	overflown int64 // bytes that went through the ring (tail included)
	cut       int64 // set by Close
}

func newHeadTailWriter(w io.Writer, max int64) *headTailWriter {
	if max <= 0 {
		max = DefaultMaxLogBytes
	}
	return &headTailWriter{w: w, headLeft: max - max/2, size: int(max / 2)}
}

func (h *headTailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if h.headLeft > 0 {
		k := min(int64(len(p)), h.headLeft)
		if _, err := h.w.Write(p[:k]); err != nil {
			return 0, err
		}
		h.headLeft -= k
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	h.overflown += int64(len(p))
	size := h.size
	if size == 0 {
		return n, nil
	}
	for len(p) > 0 {
		if !h.full && len(h.ring) < size {
			k := min(len(p), size-len(h.ring))
			h.ring = append(h.ring, p[:k]...)
			p = p[k:]
			h.next = len(h.ring) % size
			h.full = len(h.ring) == size
			continue
		}
		k := copy(h.ring[h.next:], p)
		p = p[k:]
		h.next = (h.next + k) % size
	}
	return n, nil
}

// Cut is how many bytes the log lost, 0 when everything was kept; it is
// known once Close has run.
func (h *headTailWriter) Cut() int64 { return h.cut }

// Close writes the kept tail, after a line that says how much was cut.
func (h *headTailWriter) Close() error {
	h.cut = max(0, h.overflown-int64(len(h.ring)))
	if h.cut > 0 {
		if _, err := fmt.Fprintf(h.w, "\n… [ralph cut %d bytes of agent output here: the log keeps its first and last %d bytes; [agent] max_log_bytes] …\n", h.cut, h.size); err != nil {
			return err
		}
	}
	tail := h.ring
	if h.full {
		tail = append(append([]byte(nil), h.ring[h.next:]...), h.ring[:h.next]...)
	}
	_, err := h.w.Write(tail)
	h.ring, h.next, h.full, h.overflown = h.ring[:0], 0, false, 0
	return err
}
