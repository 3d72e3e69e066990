// Package serve is `ralph serve`: a web dashboard and JSON API over one or
// more workspaces seen live (live.Source). The page, its script and its
// style are embedded, so the single binary is the whole server.
//
// Reading is open to whoever can reach the address; every control
// command needs the bearer token the server was started with. The server
// never prints: cli prints the address and the token.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/internal/live"
)

//go:embed assets
var assets embed.FS

// Workspace is one workspace the server shows, under a short name that
// API paths and the page's picker use.
type Workspace struct {
	Name   string
	Source live.Source
}

// Options configure a Server.
type Options struct {
	// Workspaces are served in this order; the first is the default one
	// that paths without ?ws= or /w/NAME/ address.
	Workspaces []live.Source
	// Token is the bearer token every control command must carry.
	Token string
	// Heartbeat is how often an idle event stream gets a comment line,
	// so that proxies and browsers keep it open; 0 means 15 s.
	Heartbeat time.Duration
	// Now is the clock of command times; nil means time.Now.
	Now func() time.Time
	// LoopbackOnly refuses requests whose Host is not a loopback name:
	// a page on another site that rebinds its DNS name to 127.0.0.1
	// could otherwise read the dashboard through the visitor's browser.
	LoopbackOnly bool
}

// Server serves the dashboard and the API.
type Server struct {
	ws        []Workspace
	token     string
	heartbeat time.Duration
	now       func() time.Time
	loopback  bool
	mux       *http.ServeMux
	receipts  map[string]*receiptBook
	// hubs follow the journals of this machine's workspaces for their
	// event streams, by workspace name.
	hubs map[string]*hub
	// streams counts the event streams open, up to maxStreams.
	streams atomic.Int64
}

// New returns a server of the workspaces in opts.
func New(opts Options) (*Server, error) {
	if len(opts.Workspaces) == 0 {
		return nil, errors.New("serve: no workspace to serve")
	}
	if opts.Token == "" {
		return nil, errors.New("serve: a token is needed for the control API")
	}
	s := &Server{token: opts.Token, heartbeat: opts.Heartbeat, now: opts.Now, loopback: opts.LoopbackOnly, receipts: map[string]*receiptBook{}, hubs: map[string]*hub{}}
	replay := make(chan struct{}, replaySlots)
	if s.heartbeat <= 0 {
		s.heartbeat = 15 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	used := map[string]int{}
	for _, src := range opts.Workspaces {
		name := filepath.Base(src.Name())
		if name == "" || name == "." || name == "/" {
			name = "workspace"
		}
		// Two checkouts of the same project share a base name: the
		// second becomes name-2, so that each has a path of its own.
		used[name]++
		if n := used[name]; n > 1 {
			name = fmt.Sprintf("%s-%d", name, n)
		}
		s.ws = append(s.ws, Workspace{Name: name, Source: src})
		s.receipts[name] = newReceiptBook(src)
		if l, ok := src.(*live.Local); ok {
			s.hubs[name] = newHub(l.Journal, live.Poll, replay)
		}
	}
	s.mux = http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /api/workspaces", s.workspaces)
	for _, prefix := range []string{"", "/w/{ws}"} {
		s.mux.HandleFunc("GET "+prefix+"/api/status", s.withWS(s.status))
		s.mux.HandleFunc("GET "+prefix+"/api/events", s.withWS(s.events))
		s.mux.HandleFunc("GET "+prefix+"/api/receipts", s.withWS(s.receiptsOf))
		s.mux.HandleFunc("POST "+prefix+"/api/control", s.withWS(s.control))
	}
	s.mux.HandleFunc("GET /w/{ws}/{$}", s.page)
	return s, nil
}

// Workspaces lists the workspaces served, with their names.
func (s *Server) Workspaces() []Workspace { return append([]Workspace(nil), s.ws...) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.loopback && !loopbackHost(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("this dashboard answers only to a loopback address (127.0.0.1, localhost), not to %q", r.Host))
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// withWS finds the workspace a request names (/w/NAME/... or ?ws=NAME;
// neither: the first) and hands it to h.
func (s *Server) withWS(h func(http.ResponseWriter, *http.Request, Workspace)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("ws")
		if name == "" {
			name = r.URL.Query().Get("ws")
		}
		if name == "" {
			h(w, r, s.ws[0])
			return
		}
		for _, ws := range s.ws {
			if ws.Name == name {
				h(w, r, ws)
				return
			}
		}
		names := make([]string, len(s.ws))
		for i, ws := range s.ws {
			names[i] = ws.Name
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no workspace %q is served here; the workspaces are: %s (GET /api/workspaces)", name, strings.Join(names, ", ")))
	}
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	// Everything the page needs is served from here: no other origin
	// may run script in it or receive its requests.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	w.Write(b)
}

// WorkspaceInfo is one entry of GET /api/workspaces.
type WorkspaceInfo struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Default is true for the workspace paths without a name address.
	Default bool `json:"default"`
	// API is the prefix of this workspace's API paths.
	API string `json:"api"`
}

func (s *Server) workspaces(w http.ResponseWriter, r *http.Request) {
	out := make([]WorkspaceInfo, len(s.ws))
	for i, ws := range s.ws {
		out[i] = WorkspaceInfo{Name: ws.Name, Dir: ws.Source.Name(), Default: i == 0, API: "/w/" + ws.Name + "/api"}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, ws Workspace) {
	rep, err := ws.Source.Status(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("could not read the status of %s: %v", ws.Name, err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) receiptsOf(w http.ResponseWriter, r *http.Request, ws Workspace) {
	rep, err := s.receipts[ws.Name].Compute(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("could not read the journal of %s: %v", ws.Name, err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// authorized reports whether r carries the server's token. The compare
// takes the same time whatever the guess, so that timing tells nothing.
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.token)) == 1
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// ErrorBody is the answer of every request that failed.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}

// NewToken returns a fresh token: 32 random bytes in hex.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// IsLoopback reports whether addr (HOST:PORT) binds to this machine only.
// An empty host binds every interface; a name other than localhost may
// resolve anywhere, so both count as reachable from elsewhere.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--addr %q is not HOST:PORT (for example 127.0.0.1:7777): %v", addr, err)
	}
	return loopbackHost(host) && host != "", nil
}

// Run serves h on ln until ctx ends, then shuts down: requests in
// flight get a few seconds to finish, and event streams end at once.
func Run(ctx context.Context, ln net.Listener, h http.Handler) error {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return base }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Event streams never end by themselves: their requests' context
	// is ended first so that Shutdown does not wait for them.
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
