package mcpserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ralphloop/ralph/internal/live"
)

// Serve runs the server on in and out (ralph's stdin and stdout) until
// in ends or ctx does; neither is an error. The calls read before in
// ended are answered first: a client that writes its requests and closes
// its end, as `printf ... | ralph mcp` does, still gets every answer.
// A line that is not a JSON-RPC message, or is longer than
// opts.MaxFrame, gets a JSON-RPC error and the server goes on.
func Serve(ctx context.Context, src live.Source, in io.Reader, out io.Writer, opts Options) error {
	max := opts.MaxFrame
	if max <= 0 {
		max = DefaultMaxFrame
	}
	lw := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	defer pr.Close() // ends the filter if the server ends first
	go filterFrames(in, pw, lw, max)
	tr := &draining{inner: &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{lw}, MaxLineLength: max + 2}}
	err := New(src, opts).Run(ctx, tr)
	if err == nil || ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// nopWriteCloser keeps the server from closing ralph's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// drainWait bounds how long the calls in progress when the input ends
// are waited for.
var drainWait = time.Minute

// draining is a transport whose connection, when its input ends, holds
// the end back until every call it read has been answered: the SDK
// closes the session at the end of the input and drops the answers of
// calls still in progress.
type draining struct{ inner mcp.Transport }

func (d *draining) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := d.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	dc := &drainConn{Connection: c}
	dc.cond = sync.NewCond(&dc.mu)
	return dc, nil
}

type drainConn struct {
	mcp.Connection
	mu       sync.Mutex
	cond     *sync.Cond
	calls    int // requests read that want an answer
	answered int // answers written
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.drain(ctx)
		return nil, err
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		c.mu.Lock()
		c.calls++
		c.mu.Unlock()
	}
	return msg, nil
}

func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if _, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		c.answered++
		c.cond.Broadcast()
		c.mu.Unlock()
	}
	return err
}

// drain waits until every call read has its answer written, at most
// drainWait and no longer than ctx.
func (c *drainConn) drain(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer stop()
	timer := time.AfterFunc(drainWait, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(drainWait)
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.answered < c.calls && ctx.Err() == nil && time.Now().Before(deadline) {
		c.cond.Wait()
	}
}
