package proc

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestTailBufferKeepsLastBytes(t *testing.T) {
	const n = 64 << 10
	tb := NewTailBuffer(n)
	var seed [32]byte
	all := make([]byte, 10<<20)
	rand.NewChaCha8(seed).Read(all)
	rng := rand.New(rand.NewPCG(1, 2))
	for rest := all; len(rest) > 0; {
		// Sizes straddle the ring size so both write paths run.
		chunk := rest[:min(len(rest), rng.IntN(3*n/2)+1)]
		rest = rest[len(chunk):]
		tb.Write(chunk)
		if cap(tb.buf) != n {
			t.Fatalf("ring grew to %d bytes", cap(tb.buf))
		}
	}
	if !bytes.Equal(tb.Bytes(), all[len(all)-n:]) {
		t.Error("Bytes is not the last n bytes written")
	}
	if tb.Total() != int64(len(all)) || !tb.Truncated() {
		t.Errorf("Total %d (want %d), Truncated %v", tb.Total(), len(all), tb.Truncated())
	}
}

func TestTailBufferSmallWrites(t *testing.T) {
	tb := NewTailBuffer(8)
	tb.Write([]byte("abc"))
	if got := tb.String(); got != "abc" || tb.Truncated() {
		t.Errorf("after 3 bytes: %q, truncated %v", got, tb.Truncated())
	}
	tb.Write([]byte("defgh"))
	if got := tb.String(); got != "abcdefgh" || tb.Truncated() {
		t.Errorf("after 8 bytes: %q, truncated %v", got, tb.Truncated())
	}
	tb.Write([]byte("ij"))
	if got := tb.String(); got != "cdefghij" || !tb.Truncated() || tb.Total() != 10 {
		t.Errorf("after 10 bytes: %q, truncated %v, total %d", got, tb.Truncated(), tb.Total())
	}
}

func TestTailBufferZero(t *testing.T) {
	tb := NewTailBuffer(0)
	if n, err := tb.Write([]byte("abc")); n != 3 || err != nil {
		t.Errorf("Write = %d, %v", n, err)
	}
	if len(tb.Bytes()) != 0 || tb.Total() != 3 || !tb.Truncated() {
		t.Errorf("Bytes %q, Total %d, Truncated %v", tb.Bytes(), tb.Total(), tb.Truncated())
	}
}
