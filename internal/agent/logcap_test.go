package agent

import (
	"bytes"
	"strings"
	"testing"
)

func TestHeadTailWriterKeepsTheStartAndTheEnd(t *testing.T) {
	var out bytes.Buffer
	w := newHeadTailWriter(&out, 20)
	for _, chunk := range []string{"0123456", "789ABCDEFGHIJ", "KLMNOPQRSTUVWXYZ", "abc"} {
		if n, err := w.Write([]byte(chunk)); err != nil || n != len(chunk) {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	total := len("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabc")
	if got, want := w.Cut(), int64(total-20); got != want {
		t.Errorf("Cut = %d, want %d", got, want)
	}
	s := out.String()
	if !strings.HasPrefix(s, "0123456789\n… [ralph cut 19 bytes") || !strings.HasSuffix(s, "max_log_bytes] …\nTUVWXYZabc") {
		t.Fatalf("log = %q, want the first 10 and the last 10 bytes around a cut line", s)
	}
}

func TestHeadTailWriterUnderTheLimitKeepsEverything(t *testing.T) {
	var out bytes.Buffer
	w := newHeadTailWriter(&out, 100)
	w.Write([]byte("hello "))
	w.Write([]byte(strings.Repeat("x", 70)))
	w.Close()
	if out.String() != "hello "+strings.Repeat("x", 70) || w.Cut() != 0 {
		t.Fatalf("log = %q (cut %d), want everything", out.String(), w.Cut())
	}
}
