// Package redact removes secrets from text before ralph writes it down or
// hands it to an agent.
//
// The secrets are the values of environment variables whose names say they
// hold one (*_API_KEY, *_TOKEN, *SECRET*, *PASSWORD*, plus names the user
// lists in config), and the passwords of URLs such as
// https://user:token@host. An agent that prints its own API key, or a check
// that echoes a credentialed remote URL, must not put it into iter-N.log,
// errors.log, the iteration record or the next prompt.
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mask replaces every secret.
const Mask = "[REDACTED]"

// MinLen is the shortest value treated as a secret. Shorter values ("1",
// "yes", "dev") occur everywhere in ordinary text; masking them would mangle
// the logs without protecting anything worth protecting.
const MinLen = 8

// urlCreds matches the password part of credentials in a URL; group 1 is
// the scheme and user, which stay readable.
var urlCreds = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'"]*):[^\s/@'"]+@`)

// IsSecretName reports whether an environment variable of this name holds
// a secret by ralph's default rules.
func IsSecretName(name string) bool {
	n := strings.ToUpper(name)
	return n == "API_KEY" || n == "TOKEN" ||
		strings.HasSuffix(n, "_API_KEY") || strings.HasSuffix(n, "_TOKEN") ||
		strings.HasSuffix(n, "_ACCESS_KEY") || strings.Contains(n, "SECRET") ||
		strings.Contains(n, "PASSWORD") || strings.Contains(n, "PASSWD")
}

// Redactor masks a fixed set of secret values and URL credentials. The
// zero value and nil mask URL credentials only.
type Redactor struct {
	secrets []string // longest first, so that a secret containing another is masked whole
}

// New returns a Redactor for the secret values in env ("NAME=value"
// entries): those of variables named like secrets and those named in
// extraNames.
func New(env []string, extraNames []string) *Redactor {
	r := &Redactor{}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !(IsSecretName(name) || slices.Contains(extraNames, name)) {
			continue
		}
		r.add(value)
	}
	return r
}

func (r *Redactor) add(value string) {
	value = strings.TrimSpace(value)
	if len(value) < MinLen || slices.Contains(r.secrets, value) {
		return
	}
	r.secrets = append(r.secrets, value)
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
}

// Redact returns s with every secret replaced by Mask.
func (r *Redactor) Redact(s string) string {
	if r != nil {
		for _, v := range r.secrets {
			if strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, Mask)
			}
		}
	}
	if strings.Contains(s, "://") {
		s = urlCreds.ReplaceAllString(s, "${1}:"+Mask+"@")
	}
	return s
}

// longest is the length of the longest secret.
func (r *Redactor) longest() int {
	if r == nil || len(r.secrets) == 0 {
		return 0
	}
	return len(r.secrets[0])
}

var (
	defaultMu sync.Mutex
	defaultR  *Redactor
	extra     []string
)

// Default returns the process's Redactor: the secrets of ralph's own
// environment, which every agent and check inherits, plus the variables
// named by AddNames.
func Default() *Redactor {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	if defaultR == nil {
		defaultR = New(osEnviron(), extra)
	}
	return defaultR
}

// AddNames adds the variables named in config ([security] redact) to the
// Default Redactor.
func AddNames(names ...string) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	for _, n := range names {
		if !slices.Contains(extra, n) {
			extra = append(extra, n)
		}
	}
	defaultR = nil
}

// Writer masks secrets in a stream before it reaches w. It holds back an
// unfinished line (up to a bound), so that a secret or a URL split across
// two writes is still masked; Flush writes what is held back.
type Writer struct {
	r   *Redactor
	w   io.Writer
	buf []byte
	err error
}

// maxHold bounds the unfinished line a Writer holds back; a longer one is
// written out except for its last bytes, which may begin a secret.
const maxHold = 64 << 10

// NewWriter returns a Writer that masks r's secrets on their way to w.
func NewWriter(w io.Writer, r *Redactor) *Writer {
	return &Writer{r: r, w: w}
}

// Write masks and writes every complete line of p and holds back the rest.
// It reports len(p) unless the underlying writer failed.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		w.emit(i + 1)
	}
	if len(w.buf) > maxHold {
		keep := max(w.r.longest(), 512) // 512 covers a credentialed URL
		w.emit(len(w.buf) - keep)
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush masks and writes whatever is held back.
func (w *Writer) Flush() error {
	if w.err == nil && len(w.buf) > 0 {
		w.emit(len(w.buf))
	}
	return w.err
}

func (w *Writer) emit(n int) {
	out := w.r.Redact(string(w.buf[:n]))
	w.buf = append(w.buf[:0], w.buf[n:]...)
	if _, err := io.WriteString(w.w, out); err != nil {
		w.err = err
	}
}

// JSON returns the JSON document b with every secret masked inside its
// strings. A secret is looked for as JSON writes it (quotes, backslashes
// and <>& escaped), so a record or an event that holds one is masked
// whatever field holds it, without knowing the record's shape.
func (r *Redactor) JSON(b []byte) []byte {
	if r != nil {
		for _, v := range r.secrets {
			for _, enc := range jsonForms(v) {
				if bytes.Contains(b, enc) {
					b = bytes.ReplaceAll(b, enc, []byte(Mask))
				}
			}
		}
	}
	if bytes.Contains(b, []byte("://")) {
		b = urlCreds.ReplaceAll(b, []byte("${1}:"+Mask+"@"))
	}
	return b
}

// jsonForms is s as it stands inside a JSON string, written with and
// without HTML escaping.
func jsonForms(s string) [][]byte {
	var forms [][]byte
	for _, html := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if enc.Encode(s) != nil {
			continue
		}
		f := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		f = f[1 : len(f)-1] // the quotes
		if !slices.ContainsFunc(forms, func(g []byte) bool { return bytes.Equal(f, g) }) {
			forms = append(forms, f)
		}
	}
	return forms
}
