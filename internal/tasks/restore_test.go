package tasks

import (
	"slices"
	"strings"
	"testing"
)

const restorePRD = "# PRD\n\n### [ ] US-001: One\n- [ ] a.txt exists\n\n### [ ] US-002: Two\n- [ ] b.txt shows [x] for done items\n- [ ] b.txt exists\n\n### [ ] US-003: Three\n- [ ] c.txt exists\n"

// An agent working on US-001 that also ticks US-002 and US-003 gets those
// marks taken back; its own story's marks stay (they are its claim).
func TestRestoreOtherMarksUndoesTicksOnOtherStories(t *testing.T) {
	after := strings.NewReplacer(
		"### [ ] US-001", "### [x] US-001", "- [ ] a.txt", "- [x] a.txt",
		"### [ ] US-002", "### [X] US-002", "- [ ] b.txt shows", "- [x] b.txt shows",
		"- [ ] c.txt", "- [x] c.txt",
	).Replace(restorePRD)
	got, ids, err := RestoreOtherMarks([]byte(restorePRD), []byte(after), "US-001")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"US-002", "US-003"}) {
		t.Errorf("restored %v, want [US-002 US-003]", ids)
	}
	want := strings.NewReplacer("### [ ] US-001", "### [x] US-001", "- [ ] a.txt", "- [x] a.txt").Replace(restorePRD)
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRestoreOtherMarksLeavesAnHonestAgentAlone(t *testing.T) {
	after := strings.Replace(restorePRD, "- [ ] a.txt", "- [x] a.txt", 1) + "\nnotes the agent added\n"
	got, ids, err := RestoreOtherMarks([]byte(restorePRD), []byte(after), "US-001")
	if err != nil || ids != nil || string(got) != after {
		t.Fatalf("RestoreOtherMarks = %q, %v, %v; want the agent's file untouched", got, ids, err)
	}
}

// A story the agent adds already ticked is reopened; a PRD the agent broke
// is put back whole.
func TestRestoreOtherMarksNewStoriesAndBrokenFiles(t *testing.T) {
	after := restorePRD + "\n### [x] US-004: Four\n- [x] d.txt exists\n"
	got, ids, err := RestoreOtherMarks([]byte(restorePRD), []byte(after), "US-001")
	if err != nil || !slices.Equal(ids, []string{"US-004"}) {
		t.Fatalf("ids %v, err %v", ids, err)
	}
	if !strings.Contains(string(got), "### [ ] US-004: Four\n- [ ] d.txt exists") {
		t.Errorf("US-004 not reopened:\n%s", got)
	}
	broken := restorePRD + "\n### [ ] US-001: Duplicate\n"
	got, ids, err = RestoreOtherMarks([]byte(restorePRD), []byte(broken), "US-001")
	if err != nil || len(ids) != 1 || string(got) != restorePRD {
		t.Fatalf("broken PRD: got %q, %v, %v; want the PRD as it was", got, ids, err)
	}
}

// FuzzRestoreOtherMarks: whatever an agent does to the marks of a valid
// PRD, after restoring every story but the kept one has exactly its old
// marks, and the kept story's block is the agent's.
func FuzzRestoreOtherMarks(f *testing.F) {
	f.Add([]byte(restorePRD), uint64(0b101101), uint8(0))
	f.Add([]byte("# P\n\n### [x] US-001: A [x]\n- [X] the list shows [x] next to finished items\n\n### [ ] US-002: B\n"), uint64(3), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, flips uint64, keepIdx uint8) {
		prd, err := ParseMarkdown("", data)
		if err != nil || len(prd.Stories) == 0 {
			return
		}
		keep := prd.Stories[int(keepIdx)%len(prd.Stories)].ID
		// The agent flips heading and criterion boxes by the bits of flips.
		after := data
		bit := 0
		for _, s := range prd.Stories {
			if flips&(1<<(bit%64)) != 0 {
				after, err = SetStoryDone(after, s.ID, !s.Done)
				if err != nil {
					t.Fatal(err)
				}
			}
			bit++
			if flips&(1<<(bit%64)) != 0 && !s.Done {
				if after, err = UncheckCriteria(after, s.ID); err != nil {
					t.Fatal(err)
				}
			}
			bit++
		}
		got, _, err := RestoreOtherMarks(data, after, keep)
		if err != nil {
			t.Fatalf("RestoreOtherMarks: %v", err)
		}
		res, err := ParseMarkdown("", got)
		if err != nil {
			t.Fatalf("restored PRD does not parse: %v\n%s", err, got)
		}
		agent, _ := ParseMarkdown("", after)
		for i, s := range res.Stories {
			want := prd.Stories[i]
			if s.ID == keep {
				want = agent.Stories[i]
			}
			if !sameMarks(want, s) || s.Block != want.Block {
				t.Fatalf("story %s: got block %q, want %q", s.ID, s.Block, want.Block)
			}
		}
	})
}
