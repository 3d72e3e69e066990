package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/serve"
	"github.com/spf13/cobra"
)

// newServeCmd is `ralph serve`: the web dashboard and JSON API of one or
// more workspaces, until Ctrl+C.
func newServeCmd(env *Env) *cobra.Command {
	var addr, tokenFile string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "serve [DIR...]",
		Short: "Serve a web dashboard and JSON API of this workspace's runs",
		Long: `Serve a web dashboard and JSON API of the workspace in the working
directory, or of each DIR, until Ctrl+C.

The page shows the run, the board, the workers, the agent's output, the
journal, what waits for a person, charts and per-story receipts, live.
Reading needs nothing; every control (pause, hint, skip, ...) needs the
token printed at start, or the one in --token-file, sent as
Authorization: Bearer TOKEN. The printed address carries it after #token=
for the page.

API: GET /api/status, /api/events (Server-Sent Events), /api/receipts,
/api/workspaces; POST /api/control. With several workspaces, add ?ws=NAME
or use /w/NAME/api/...`,
		Example: `  ralph serve
  ralph serve ../app ../lib --addr 127.0.0.1:8080
  ralph serve --addr 0.0.0.0:7777 --token-file ~/.ralph-token`,
		RunE: func(cmd *cobra.Command, args []string) error {
			loopback, err := serve.IsLoopback(addr)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if !loopback && tokenFile == "" {
				return usageErrorf("--addr %s can be reached from other machines: give --token-file FILE with a secret token (for example: openssl rand -hex 32 > FILE), or serve on 127.0.0.1", addr)
			}
			token, err := serveToken(tokenFile)
			if err != nil {
				return err
			}
			dirs := args
			if len(dirs) == 0 {
				dirs = []string{""}
			}
			var srcs []live.Source
			for _, d := range dirs {
				l, err := openLive(cmd.Context(), env, d)
				if err != nil {
					if d != "" {
						return fmt.Errorf("%s: %w", d, err)
					}
					return err
				}
				srcs = append(srcs, l)
			}
			srv, err := serve.New(serve.Options{Workspaces: srcs, Token: token, Now: env.Now, LoopbackOnly: loopback})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("could not listen on %s: %v; another ralph serve may be there: give another --addr", addr, err)
			}
			url := "http://" + urlHost(ln.Addr().String(), addr)
			page := url + "/"
			if tokenFile == "" {
				page += "#token=" + token
			}
			if jsonOut {
				out := map[string]any{"url": url + "/", "workspaces": names(srv)}
				if tokenFile == "" {
					out["token"] = token
				} else {
					out["token_file"] = tokenFile
				}
				if err := writeJSONLine(env, out); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(env.IO.Out, "ralph serve: %s on %s\n", strings.Join(names(srv), ", "), page)
				if tokenFile == "" {
					fmt.Fprintf(env.IO.Out, "token for the control API: %s\n", token)
				} else {
					fmt.Fprintf(env.IO.Out, "controls need the token in %s\n", tokenFile)
				}
				fmt.Fprintln(env.IO.Out, "Ctrl+C stops the server (not the runs).")
			}
			return serve.Run(cmd.Context(), ln, srv)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:7777", "HOST:PORT to listen on (port 0 picks a free one)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the control token (needed to listen beyond this machine)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print one JSON line {"url": ..., "token": ...} at start`)
	return cmd
}

func names(srv *serve.Server) []string {
	var out []string
	for _, w := range srv.Workspaces() {
		out = append(out, w.Name)
	}
	return out
}

// serveToken is the token of --token-file, or a fresh one.
func serveToken(file string) (string, error) {
	if file == "" {
		return serve.NewToken()
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", &UsageError{Err: fmt.Errorf("--token-file: %v", err)}
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 || strings.ContainsAny(tok, " \t\r\n") {
		return "", &UsageError{Err: errors.New("--token-file must hold one token of at least 16 characters on one line (for example: openssl rand -hex 32 > FILE)")}
	}
	return tok, nil
}

// urlHost is the host:port to print: the port the listener got (for
// port 0), under the name that was asked for, or 127.0.0.1 for a bind
// to every interface.
func urlHost(bound, asked string) string {
	_, port, _ := net.SplitHostPort(bound)
	host, _, _ := net.SplitHostPort(asked)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func writeJSONLine(env *Env, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.IO.Out, "%s\n", b)
	return err
}
