package runkit

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

// CooldownsFile is the name of the file, in the state home (.ralph), that
// says which agents rest after a usage limit and until when. It is one
// file for every run, machine and worker of the workspace: a limit is the
// account's, not the run's, so an agent limited in one run is not asked
// again by another before its reset.
const CooldownsFile = "cooldowns.json"

// CooldownsSchemaVersion is the version of CooldownsFile this ralph writes.
const CooldownsSchemaVersion = 1

// Cooldowns is the shared record of agents resting after a usage limit.
// Every read goes to the file, so what another run recorded a moment ago
// counts; every change is a locked read-modify-write.
type Cooldowns struct {
	path string
}

// Rest is one agent's cooldown.
type Rest struct {
	Until time.Time `json:"until"`
	// Why is the limit's message, for status and the journal.
	Why string `json:"why,omitempty"`
}

type cooldownsDoc struct {
	SchemaVersion int             `json:"schema_version"`
	Agents        map[string]Rest `json:"agents"`
}

// OpenCooldowns returns the cooldowns kept in home (the .ralph folder).
func OpenCooldowns(home string) *Cooldowns {
	return &Cooldowns{path: home + string(os.PathSeparator) + CooldownsFile}
}

// Path is the file the cooldowns live in.
func (c *Cooldowns) Path() string { return c.path }

// All returns every agent still resting at now, keyed by agent name. A
// missing file is no cooldown; an unreadable one is an error, never
// silently empty, since asking a limited agent again can burn a quota.
func (c *Cooldowns) All(now time.Time) (map[string]Rest, error) {
	d, err := c.read()
	if err != nil {
		return nil, err
	}
	out := map[string]Rest{}
	for name, r := range d.Agents {
		if r.Until.After(now) {
			out[name] = r
		}
	}
	return out, nil
}

// Until says when agent may be asked again, and whether it rests at now.
func (c *Cooldowns) Until(agent string, now time.Time) (time.Time, bool) {
	all, err := c.All(now)
	if err != nil {
		return time.Time{}, false
	}
	r, ok := all[agent]
	return r.Until, ok
}

// Pick returns the first of names that is not resting at now; when every
// one is, ok is false and free is when the first of them is free again.
func (c *Cooldowns) Pick(names []string, now time.Time) (name string, ok bool, free time.Time, err error) {
	all, err := c.All(now)
	if err != nil {
		return "", false, time.Time{}, err
	}
	for _, n := range names {
		r, resting := all[n]
		if !resting {
			return n, true, time.Time{}, nil
		}
		if free.IsZero() || r.Until.Before(free) {
			free = r.Until
		}
	}
	return "", false, free, nil
}

// Set records that agent rests until until; a later reset already
// recorded (by another run) is kept.
func (c *Cooldowns) Set(agent string, until time.Time, why string) error {
	return c.change(func(d *cooldownsDoc) {
		if old, ok := d.Agents[agent]; ok && old.Until.After(until) {
			return
		}
		d.Agents[agent] = Rest{Until: until.UTC(), Why: why}
	})
}

// Merge adds rests recorded elsewhere (the cooldowns an older ralph kept
// in state.json) without shortening any.
func (c *Cooldowns) Merge(rests map[string]time.Time, now time.Time) error {
	var add bool
	for _, t := range rests {
		add = add || t.After(now)
	}
	if !add {
		return nil
	}
	return c.change(func(d *cooldownsDoc) {
		for name, t := range rests {
			if old, ok := d.Agents[name]; t.After(now) && (!ok || t.After(old.Until)) {
				d.Agents[name] = Rest{Until: t.UTC(), Why: old.Why}
			}
		}
	})
}

// Clear ends agent's cooldown.
func (c *Cooldowns) Clear(agent string) error {
	return c.change(func(d *cooldownsDoc) { delete(d.Agents, agent) })
}

// Summary lists the agents resting at now, "name until 15:04:05, ...", for
// messages.
func (c *Cooldowns) Summary(now time.Time) string {
	all, err := c.All(now)
	if err != nil {
		return err.Error()
	}
	parts := make([]string, 0, len(all))
	for name, r := range all {
		parts = append(parts, fmt.Sprintf("%s until %s", name, r.Until.Local().Format("15:04:05")))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (c *Cooldowns) read() (cooldownsDoc, error) {
	d := cooldownsDoc{SchemaVersion: CooldownsSchemaVersion, Agents: map[string]Rest{}}
	if _, err := store.ReadJSON(c.path, CooldownsSchemaVersion, &d); err != nil && !errors.Is(err, os.ErrNotExist) {
		return d, err
	}
	if d.Agents == nil {
		d.Agents = map[string]Rest{}
	}
	d.SchemaVersion = CooldownsSchemaVersion
	return d, nil
}

// change applies f to the file under an exclusive lock, so that two runs
// recording limits at once both keep theirs. Rests long past are dropped.
func (c *Cooldowns) change(f func(*cooldownsDoc)) error {
	l, err := os.OpenFile(c.path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", l.Name(), err)
	}
	defer syscall.Flock(int(l.Fd()), syscall.LOCK_UN)
	d, err := c.read()
	if err != nil {
		return err
	}
	f(&d)
	for name, r := range d.Agents {
		if time.Since(r.Until) > 24*time.Hour {
			delete(d.Agents, name)
		}
	}
	return store.WriteJSON(c.path, d)
}
