//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// serving starts an HTTP server on the host's loopback that answers body.
func serving(t *testing.T, body string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	t.Cleanup(s.Close)
	return s
}

// denials collects what a proxy reports.
type denials struct {
	mu   sync.Mutex
	list []Denied
}

func (d *denials) add(x Denied) { d.mu.Lock(); d.list = append(d.list, x); d.mu.Unlock() }

func (d *denials) get() []Denied {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Denied(nil), d.list...)
}

func startProxy(t *testing.T, allow ...string) (*Proxy, *denials) {
	t.Helper()
	d := &denials{}
	p, err := StartProxy(allow, d.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, d
}

// proxied is a proxy-mode policy whose forwarder is this test binary.
func proxied(t *testing.T, p *Proxy, allow ...string) Policy {
	t.Helper()
	needBwrap(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed: the proxy tests use it as the agent's HTTP client (apt-get install curl)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Policy{WorkTree: t.TempDir(), Network: NetProxy, ProxySocket: p.Socket, Allow: allow, Forwarder: []string{self, ForwardCommand}}
}

// An allowed server on the host's loopback is reached inside at its own
// address (how an agent reaches a local model gateway); a second one,
// not allowed, is neither reachable directly nor through the proxy, and
// the proxy reports the try.
func TestProxyAllowsOnlyTheListedLoopbackServer(t *testing.T) {
	model, other := serving(t, "model here"), serving(t, "secret data")
	modelAddr, otherAddr := strings.TrimPrefix(model.URL, "http://"), strings.TrimPrefix(other.URL, "http://")
	if out, err := plain(t, "/", "curl -sS --noproxy '*' "+other.URL); err != nil || out != "secret data" {
		t.Fatalf("without the sandbox the second server should answer: %v\n%s", err, out)
	}
	px, denied := startProxy(t, modelAddr)
	p := proxied(t, px, modelAddr)

	if out, err := boxed(t, p, "curl -sS "+model.URL); err != nil || out != "model here" {
		t.Errorf("the allowed server at its own address from inside: %v\n%s", err, out)
	}
	if out, err := boxed(t, p, "curl -sS "+other.URL); err == nil || strings.Contains(out, "secret data") {
		t.Errorf("the server not allowed was reached directly from inside:\n%s", out)
	}
	out, err := boxed(t, p, "curl -sS -i --noproxy '' "+other.URL)
	if err != nil || !strings.Contains(out, "403") || !strings.Contains(out, "X-Ralph-Proxy: denied") || strings.Contains(out, "secret data") {
		t.Errorf("through the proxy the server not allowed should get a 403 from the proxy: %v\n%s", err, out)
	}
	_, port, _ := net.SplitHostPort(otherAddr)
	if got := denied.get(); len(got) != 1 || got[0].Host != "127.0.0.1" || fmt.Sprint(got[0].Port) != port || got[0].At.IsZero() {
		t.Errorf("denied = %+v, want one try at %s", got, otherAddr)
	}
}

// An HTTPS client inside asks the proxy for a tunnel (CONNECT) to a host
// that is not allowed: it fails, and the proxy reports it.
func TestProxyRefusesTunnelToHostNotAllowed(t *testing.T) {
	px, denied := startProxy(t, "api.anthropic.com")
	p := proxied(t, px)
	out, err := boxed(t, p, "curl -sS https://evil.example/")
	if err == nil {
		t.Errorf("curl to evil.example succeeded from inside:\n%s", out)
	}
	if !strings.Contains(out, "403") {
		t.Errorf("curl should say the proxy answered 403:\n%s", out)
	}
	if got := denied.get(); len(got) != 1 || got[0].Host != "evil.example" || got[0].Port != 443 {
		t.Errorf("denied = %+v, want evil.example:443", got)
	}
}

// The proxy's answers on the wire: a tunnel to an allowed destination,
// a 403 marked as the proxy's own for any other.
func TestProxyConnect(t *testing.T) {
	srv := serving(t, "tunnelled")
	addr := strings.TrimPrefix(srv.URL, "http://")
	px, denied := startProxy(t, addr, "*.example.org")
	connect := func(dest string) (*http.Response, *bufio.Reader, net.Conn) {
		c, err := net.Dial("unix", px.Socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return resp, br, c
	}
	for _, dest := range []string{"evil.example:443", "example.org:443", "a.example.org:22"} {
		resp, _, _ := connect(dest)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Ralph-Proxy") != "denied" {
			t.Errorf("CONNECT %s: %s %v, want 403 with X-Ralph-Proxy: denied", dest, resp.Status, resp.Header)
		}
	}
	if got := denied.get(); len(got) != 3 || got[0].Host != "evil.example" || got[2].Port != 22 {
		t.Errorf("denied = %+v", got)
	}
	resp, br, c := connect(addr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %s", addr, resp.Status)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
	got, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, _ := got.Body.Read(b)
	if string(b[:n]) != "tunnelled" {
		t.Errorf("through the tunnel: %q", b[:n])
	}
}

func TestForwarderPassesTheExitCode(t *testing.T) {
	px, _ := startProxy(t)
	p := proxied(t, px)
	for script, want := range map[string]int{"exit 0": 0, "exit 7": 7, "kill -TERM $$": 128 + 15} {
		_, err := boxed(t, p, script)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Errorf("%q: exit code %d, want %d", script, code, want)
		}
	}
}

func TestAllowList(t *testing.T) {
	for _, c := range []struct {
		entry, host string
		port        int
		want        bool
	}{
		{"api.anthropic.com", "api.anthropic.com", 443, true},
		{"api.anthropic.com", "API.Anthropic.com.", 80, true},
		{"api.anthropic.com", "api.anthropic.com", 22, false},
		{"api.anthropic.com", "evil.anthropic.com", 443, false},
		{"*.example.org", "a.b.example.org", 443, true},
		{"*.example.org", "example.org", 443, false},
		{"*.example.org", "badexample.org", 443, false},
		{"127.0.0.1:8787", "127.0.0.1", 8787, true},
		{"127.0.0.1:8787", "127.0.0.1", 8788, false},
		{"[::1]:8787", "::1", 8787, true},
		{"::1", "0:0:0:0:0:0:0:1", 443, true},
		{"localhost:9000", "localhost", 9000, true},
	} {
		a, err := parseAllowed(c.entry)
		if err != nil {
			t.Fatalf("%q: %v", c.entry, err)
		}
		if got := a.match(c.host, c.port); got != c.want {
			t.Errorf("%q allows %s:%d = %v, want %v", c.entry, c.host, c.port, got, c.want)
		}
	}
	for _, bad := range []string{"https://x.org", "x.org/path", "x.org:http", "x.org:70000", "", "*", "a*.org"} {
		if err := CheckAllowed(bad); err == nil {
			t.Errorf("CheckAllowed(%q) = nil, want an error", bad)
		}
	}
}

// ralph-sandbox-net next to ralph is the forwarder; without it, ralph's
// own hidden command is.
func TestDefaultForwarderPrefersTheSmallProgram(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	got, err := defaultForwarder()
	if err != nil || len(got) != 2 || got[0] != exe || got[1] != ForwardCommand {
		t.Fatalf("without %s beside it: %q, %v; want this program's %s", ForwarderProgram, got, err, ForwardCommand)
	}
	own := filepath.Join(filepath.Dir(exe), ForwarderProgram)
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(own) })
	if got, err := defaultForwarder(); err != nil || len(got) != 1 || got[0] != own {
		t.Errorf("with %s beside it: %q, %v", ForwarderProgram, got, err)
	}
}
