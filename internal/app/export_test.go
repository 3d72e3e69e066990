package app

import "github.com/ralphloop/ralph/internal/notify"

// NotifySettings lets the tests read what Notifier hands notify.
func (a *App) NotifySettings() notify.Settings { return a.notifySettings() }
