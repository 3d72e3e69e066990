package app

import (
	"time"

	"github.com/ralphloop/ralph/internal/notify"
)

// Notifier sends the notifications [notify] configures for the
// workspace's runs; nil when it names no channel. log receives what could
// not be delivered (nil: nothing is logged); backoff is the wait before
// each retry (nil: notify's default).
func (a *App) Notifier(log func(string), backoff func(int) time.Duration) *notify.Notifier {
	if !a.cfg.Notify.Configured() || a.WS == nil {
		return nil
	}
	return notify.New(a.notifySettings(), notify.Options{Workspace: a.WS.Root, Getenv: a.getenv, Log: log, Backoff: backoff})
}

// notifySettings are [notify] as a Notifier takes them: every channel
// (the shorthand lists first) with the events it sends.
func (a *App) notifySettings() notify.Settings {
	sec := a.cfg.Notify
	s := notify.Settings{Secret: sec.Secret, SecretEnv: sec.SecretEnv, Timeout: sec.Timeout.Duration}
	for _, c := range sec.AllChannels() {
		s.Channels = append(s.Channels, notify.Channel{Type: c.Type, URL: c.URL, Command: c.Command, Events: c.Events})
	}
	return s
}
