package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Proxy is the allow-list proxy that ralph runs outside a sandbox with
// network "proxy": an HTTP proxy (CONNECT tunnels and absolute-form
// plain HTTP) on a unix socket, which Wrap binds into the sandbox. It
// connects only to the destinations on its allow list and reports every
// other one it is asked for.
type Proxy struct {
	// Socket is the path of the unix socket (Policy.ProxySocket).
	Socket string

	dir      string
	ln       net.Listener
	allow    []allowed
	onDenied func(Denied)
	upstream *http.Transport

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// dialTimeout bounds the proxy's connection to a destination.
const dialTimeout = 15 * time.Second

// StartProxy listens on a socket in a new folder only the user can
// enter, and serves until Close. onDenied (nil: nobody is told) is
// called for each refused destination, from the connection's goroutine.
func StartProxy(allow []string, onDenied func(Denied)) (*Proxy, error) {
	p := &Proxy{onDenied: onDenied, conns: map[net.Conn]bool{},
		upstream: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: dialTimeout}).DialContext}}
	for _, s := range allow {
		a, err := parseAllowed(s)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		p.allow = append(p.allow, a)
	}
	dir, err := os.MkdirTemp("", "ralph-net-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: the proxy's folder: %w", err)
	}
	p.dir, p.Socket = dir, filepath.Join(dir, "proxy.sock")
	if p.ln, err = net.Listen("unix", p.Socket); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox: the proxy's socket: %w", err)
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Close stops the proxy, ends its open connections and removes its folder.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.upstream.CloseIdleConnections()
	os.RemoveAll(p.dir)
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
			c.Close()
		}()
	}
}

// allows reports whether the allow list lets a connection go to host:port.
func (p *Proxy) allows(host string, port int) bool {
	for _, a := range p.allow {
		if a.match(host, port) {
			return true
		}
	}
	return false
}

// handle serves one client connection: a CONNECT becomes a tunnel; plain
// HTTP requests are forwarded one after the other.
func (p *Proxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		tunnel := req.Method == http.MethodConnect
		authority, defaultPort := req.Host, "443"
		if !tunnel {
			if req.URL.Scheme != "http" || req.URL.Host == "" {
				reply(c, http.StatusBadRequest, "ralph sandbox proxy: send CONNECT host:port, or a request for an absolute http:// URL\n")
				return
			}
			authority, defaultPort = req.URL.Host, "80"
		}
		host, port, ok := splitAuthority(authority, defaultPort)
		if !ok {
			reply(c, http.StatusBadRequest, "ralph sandbox proxy: bad destination "+strconv.Quote(authority)+"\n")
			return
		}
		if !p.allows(host, port) {
			if p.onDenied != nil {
				p.onDenied(Denied{Host: host, Port: port, At: time.Now()})
			}
			reply(c, http.StatusForbidden, fmt.Sprintf("ralph sandbox: %s is not on the allow list ([sandbox] allow_hosts)\n", net.JoinHostPort(host, strconv.Itoa(port))))
			return
		}
		if tunnel {
			up, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), dialTimeout)
			if err != nil {
				reply(c, http.StatusBadGateway, "ralph sandbox proxy: "+err.Error()+"\n")
				return
			}
			io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n")
			relay(c, br, up, up)
			return
		}
		req.RequestURI = ""
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		resp, err := p.upstream.RoundTrip(req)
		if err != nil {
			reply(c, http.StatusBadGateway, "ralph sandbox proxy: "+err.Error()+"\n")
			return
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

// splitAuthority reads "host:port" (a missing port is def) into its parts.
func splitAuthority(authority, def string) (string, int, bool) {
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		host, port = authority, def
	}
	n, err := strconv.Atoi(port)
	return host, n, err == nil && host != "" && n > 0 && n < 65536
}

// reply answers with status and closes: the client's connection is done.
// A refusal carries X-Ralph-Proxy, which tells it from a 403 of the
// destination itself.
func reply(c net.Conn, status int, body string) {
	mark := ""
	if status == http.StatusForbidden {
		mark = "X-Ralph-Proxy: denied\r\n"
	}
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), mark, len(body), body)
}

// relay copies bytes both ways between a (read through ar, which may
// hold bytes already read from it) and b (read through br) until both
// directions end, then closes both.
func relay(a net.Conn, ar io.Reader, b net.Conn, br io.Reader) {
	done := make(chan struct{}, 1)
	go func() {
		io.Copy(b, ar)
		closeWrite(b)
		done <- struct{}{}
	}()
	io.Copy(a, br)
	closeWrite(a)
	<-done
	a.Close()
	b.Close()
}

// closeWrite tells the other end that no more bytes come, keeping the
// way back open for its answer.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		c.Close()
	}
}
