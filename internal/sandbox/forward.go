package sandbox

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// ForwardCommand is ralph's hidden subcommand that runs ForwardMain: the
// first program inside a sandbox with network "proxy".
const ForwardCommand = "__sandbox-net"

// ForwardMain is the forwarder inside the sandbox's network namespace,
// where the proxy's unix socket is the one way out:
//
//	-socket PATH -port N [-listen HOST:PORT]... -- ARGV...
//
// It relays each connection to 127.0.0.1:N to the socket (the agent's
// HTTP(S)_PROXY), and each connection to a -listen address (an allowed
// loopback destination of the host) through the proxy with a CONNECT to
// that same address, so that a base URL like http://127.0.0.1:8787
// reaches the host's server unchanged. Then it runs ARGV as its child,
// passes it SIGTERM and SIGINT, and exits with its exit code (128+n for
// a death by signal n).
func ForwardMain(args []string) int {
	fs := flag.NewFlagSet(ForwardCommand, flag.ContinueOnError)
	socket := fs.String("socket", "", "the proxy's unix socket")
	port := fs.Int("port", 0, "the port of the proxy inside, on 127.0.0.1")
	var listens listFlag
	fs.Var(&listens, "listen", "an allowed loopback address to serve inside")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *socket == "" || *port == 0 || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "ralph sandbox: usage: "+ForwardCommand+" -socket PATH -port N [-listen HOST:PORT]... -- ARGV...")
		return 2
	}
	proxy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ralph sandbox: the proxy inside:", err)
		return 125
	}
	go accept(proxy, func(c net.Conn) { toProxy(c, *socket, "") })
	for _, addr := range listens {
		host, p, _ := net.SplitHostPort(addr)
		hosts := []string{host}
		if host == "localhost" {
			hosts = []string{"127.0.0.1", "::1"}
		}
		for i, h := range hosts {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, p))
			if err != nil {
				if i == 0 {
					// The agent may never use it; it is told when it does.
					fmt.Fprintf(os.Stderr, "ralph sandbox: %s is not served inside: %v\n", addr, err)
				}
				continue
			}
			go accept(ln, func(c net.Conn) { toProxy(c, *socket, addr) })
		}
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "ralph sandbox:", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	go func() {
		for s := range signals {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ralph sandbox:", err)
		return 125
	}
	return 0
}

// listFlag is a flag given once per value.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func accept(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

// toProxy relays c to the proxy's socket; with a destination it first
// asks the proxy for a tunnel to it and closes c when the proxy refuses.
func toProxy(c net.Conn, socket, dest string) {
	up, err := net.Dial("unix", socket)
	if err != nil {
		c.Close()
		return
	}
	var upr io.Reader = up
	if dest != "" {
		fmt.Fprintf(up, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
		br := bufio.NewReader(up)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != http.StatusOK {
			c.Close()
			up.Close()
			return
		}
		upr = br
	}
	relay(c, c, up, upr)
}
