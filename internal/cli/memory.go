package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

var memoryTypes = []string{memory.TypeLesson, memory.TypeBlocker, memory.TypeBug, memory.TypeTechnicalDebt, memory.TypeAgentContext, memory.TypeEvent}

func validMemoryType(t string) bool {
	for _, m := range memoryTypes {
		if t == m {
			return true
		}
	}
	return false
}

func newMemoryCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Search, list and add to the memory store (lessons, blockers, bugs, task events)",
		Long: `The memory store is what ralph queries at the start of every iteration:
agent context (memories whose name contains "Developer Agent", the notes
every agent is given) and known issues (open blockers, bugs and technical
debt, newest first), both shown in the prompt. It is SQLite in
.ralph/memory.db by default, Neo4j when [memory] store = "neo4j" or
NEO4J_URI is set, or .ralph/memory.jsonl with store = "file".

Writes made while the store is unreachable wait in .ralph/memory-queue.jsonl
and are replayed, in order and once, by the next command that reaches it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newMemorySearchCmd(env), newMemoryListCmd(env), newMemoryAddCmd(env))
	return cmd
}

func newMemorySearchCmd(env *Env) *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "search TEXT...",
		Short: "Memories whose name or text contains TEXT (ignoring case), newest first",
		Long: `Search the memories whose name or text contains TEXT, ignoring case, newest
first. Several words are one phrase, as if quoted: 'ralph memory search
flaky test' finds "Flaky test in CI" but not "test is flaky".`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || strings.TrimSpace(strings.Join(args, " ")) == "" {
				return usageErrorf("memory search needs the text to look for: ralph memory search \"flaky test\"")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return listMemories(cmd, env, limit, asJSON, func(s *memory.Queued) ([]memory.Node, error) {
				return s.Search(cmd.Context(), strings.Join(args, " "), limit)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the memories as a JSON array")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many (0: all)")
	return cmd
}

func newMemoryListCmd(env *Env) *cobra.Command {
	var asJSON bool
	var limit int
	var typ string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Memories, newest first, optionally of one type",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if typ != "" && !validMemoryType(typ) {
				return usageErrorf("unknown memory type %q: use one of %s", typ, strings.Join(memoryTypes, ", "))
			}
			return listMemories(cmd, env, limit, asJSON, func(s *memory.Queued) ([]memory.Node, error) {
				return s.List(cmd.Context(), typ, limit)
			})
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "only this type: "+strings.Join(memoryTypes, ", "))
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (0: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the memories as a JSON array")
	return cmd
}

func newMemoryAddCmd(env *Env) *cobra.Command {
	var typ, name, text, id, trigger string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add --type T --name NAME [--text TEXT]",
		Short: "Add a memory; a lesson is also written to .ralph/guardrails.md as a sign",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case typ == "":
				return usageErrorf("memory add needs --type: one of %s", strings.Join(memoryTypes, ", "))
			case !validMemoryType(typ):
				return usageErrorf("unknown memory type %q: use one of %s", typ, strings.Join(memoryTypes, ", "))
			}
			if strings.TrimSpace(name) == "" {
				return usageErrorf("memory add needs --name: ralph memory add --type lesson --name \"Run the tests first\"")
			}
			ws, a, err := openWorkspace(cmd.Context(), env)
			if err != nil {
				return err
			}
			if _, err := ws.EnsureStateFiles(env.Now()); err != nil {
				return err
			}
			s, err := a.Memory()
			if err != nil {
				return err
			}
			defer s.Close()
			n := memory.Node{ID: id, Name: strings.TrimSpace(name), MemoryType: typ, Text: text, Date: env.Now().UTC()}
			if n.ID == "" {
				n.ID = memory.NewID()
			}
			if _, err := s.Add(cmd.Context(), n); err != nil {
				return err
			}
			queued := false
			if pending, err := s.Pending(); err == nil {
				for _, e := range pending {
					if e.Node != nil && e.Node.ID == n.ID {
						queued = true
					}
				}
			}
			if typ == memory.TypeLesson {
				if err := appendSign(ws, n, trigger); err != nil {
					return err
				}
			}
			if asJSON {
				return writeJSON(env, struct {
					memory.Node
					Store  string `json:"store"`
					Queued bool   `json:"queued"`
				}{n, s.Name(), queued})
			}
			if queued {
				fmt.Fprintf(env.IO.Out, "memory (%s) unreachable: %s queued in %s, replayed on the next connection\n", s.Name(), n.ID, ws.Rel(s.QueuePath))
			} else {
				fmt.Fprintf(env.IO.Out, "added %s %s to %s memory\n", typ, n.ID, s.Name())
			}
			if typ == memory.TypeLesson {
				fmt.Fprintf(env.IO.Out, "sign added to %s\n", ws.Rel(ws.GuardrailsPath()))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "the memory type: "+strings.Join(memoryTypes, ", "))
	cmd.Flags().StringVar(&name, "name", "", "a short name; one containing \"Developer Agent\" is agent context, shown in every prompt")
	cmd.Flags().StringVar(&text, "text", "", "the details")
	cmd.Flags().StringVar(&id, "id", "", "the memory's id (default: a new one); the same id again replaces it")
	cmd.Flags().StringVar(&trigger, "trigger", "", "for a lesson: when the sign applies (default: before every iteration)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stored memory as JSON")
	return cmd
}

// appendSign writes a lesson into the guardrails, which every prompt
// shows, in the file's sign format.
func appendSign(ws *workspace.Workspace, n memory.Node, trigger string) error {
	if trigger == "" {
		trigger = "Before every iteration"
	}
	instr := n.Text
	if instr == "" {
		instr = n.Name
	}
	sign := fmt.Sprintf("\n## Sign: %s\n- **Trigger**: %s\n- **Instruction**: %s\n- **Added after**: memory lesson %s (%s)\n",
		text.OneLine(n.Name), text.OneLine(trigger), text.OneLine(instr), n.ID, n.Date.Format("2006-01-02"))
	return store.AppendFile(ws.GuardrailsPath(), []byte(sign))
}

// listMemories prints the memories query finds, at most limit of them.
// A negative --limit is refused: it would read as "all" and hide the typo.
func listMemories(cmd *cobra.Command, env *Env, limit int, asJSON bool, query func(*memory.Queued) ([]memory.Node, error)) error {
	if limit < 0 {
		return usageErrorf("--limit must be 0 (all) or more, got %d", limit)
	}
	return withMemory(cmd, env, func(s *memory.Queued) error {
		nodes, err := query(s)
		if err != nil {
			return fmt.Errorf("memory (%s) unreachable: %w", s.Name(), err)
		}
		return printNodes(env.IO.Out, nodes, asJSON)
	})
}

func withMemory(cmd *cobra.Command, env *Env, f func(*memory.Queued) error) error {
	_, a, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	s, err := a.Memory()
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

func printNodes(out io.Writer, nodes []memory.Node, asJSON bool) error {
	if asJSON {
		if nodes == nil {
			nodes = []memory.Node{}
		}
		return encodeJSON(out, nodes)
	}
	if len(nodes) == 0 {
		fmt.Fprintln(out, "no memories")
		return nil
	}
	for _, n := range nodes {
		fmt.Fprintf(out, "%s  %-14s %s  [%s]\n", n.Date.Format("2006-01-02"), n.MemoryType, n.Name, n.ID)
		if n.Text != "" {
			fmt.Fprintf(out, "    %s\n", text.OneLine(n.Text))
		}
		if len(n.Props) > 0 {
			keys := make([]string, 0, len(n.Props))
			for k := range n.Props {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + "=" + n.Props[k]
			}
			fmt.Fprintf(out, "    %s\n", strings.Join(parts, " "))
		}
	}
	return nil
}
