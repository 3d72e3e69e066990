package words

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 criteria"}, {1, "1 criterion"}, {2, "2 criteria"}, {-1, "-1 criteria"}} {
		if got := Count(c.n, "criterion", "criteria"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Plural(1, "story", "stories"); got != "story" {
		t.Errorf("Plural(1) = %q", got)
	}
}
