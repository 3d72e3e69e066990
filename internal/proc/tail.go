package proc

import "sync"

// TailBuffer is an io.Writer that keeps only the last N bytes written; memory
// stays bounded at N bytes however much is written. It is safe for
// concurrent use, so one TailBuffer may collect both stdout and stderr.
type TailBuffer struct {
	mu    sync.Mutex
	buf   []byte // ring of len N, allocated once
	pos   int    // where the next byte goes
	total int64
}

// NewTailBuffer returns a TailBuffer keeping the last n bytes; n <= 0 keeps
// nothing but still counts.
func NewTailBuffer(n int) *TailBuffer {
	return &TailBuffer{buf: make([]byte, max(n, 0))}
}

// Write keeps the tail of p and always reports len(p) written with a nil
// error, so it never cuts a child's output short.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	n := len(t.buf)
	if n == 0 {
		return len(p), nil
	}
	if len(p) >= n {
		copy(t.buf, p[len(p)-n:])
		t.pos = 0
		return len(p), nil
	}
	c := copy(t.buf[t.pos:], p)
	copy(t.buf, p[c:])
	t.pos = (t.pos + len(p)) % n
	return len(p), nil
}

// Bytes returns a copy of the kept tail, oldest byte first.
func (t *TailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total < int64(len(t.buf)) {
		return append([]byte(nil), t.buf[:t.pos]...)
	}
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.pos:]...)
	return append(out, t.buf[:t.pos]...)
}

// String returns the kept tail as a string.
func (t *TailBuffer) String() string { return string(t.Bytes()) }

// Total returns the number of bytes written in all, kept or not.
func (t *TailBuffer) Total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Truncated reports whether bytes were dropped, that is Total exceeds N.
func (t *TailBuffer) Truncated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total > int64(len(t.buf))
}
