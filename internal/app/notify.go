package app

import (
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/notify"
)

// NotifySettings are [notify] as a Notifier takes them: every channel
// (the shorthand lists first) with the events it sends.
func NotifySettings(sec config.NotifySection) notify.Settings {
	s := notify.Settings{Secret: sec.Secret, SecretEnv: sec.SecretEnv, Timeout: sec.Timeout.Duration}
	for _, c := range sec.AllChannels() {
		s.Channels = append(s.Channels, notify.Channel{Type: c.Type, URL: c.URL, Command: c.Command, Events: c.Events})
	}
	return s
}
