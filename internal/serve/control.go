package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"syscall"

	"github.com/ralphloop/ralph/internal/control"
)

// maxControlBody bounds a command's body: its longest field, a hint, is
// at most 16 KiB (control.Command.Validate).
const maxControlBody = 64 << 10

// control is POST /api/control: a control.Command in JSON, without id,
// time or by (the server sets them; by is "web"), answered with the
// control.Result. A missing or wrong token is 401 and changes nothing.
func (s *Server) control(w http.ResponseWriter, r *http.Request, ws Workspace) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ralph"`)
		writeError(w, http.StatusUnauthorized, "controls need the token ralph serve printed at start: send it as the header Authorization: Bearer TOKEN (the page takes it from the #token= part of the URL ralph serve printed)")
		return
	}
	var cmd control.Command
	dec := json.NewDecoder(io.LimitReader(r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cmd); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the body is not a control command in JSON (%v); for example {\"command\": \"hint\", \"text\": \"use the existing HTTP client\"}", err))
		return
	}
	// Who gave a command, and when, is the server's to say.
	now := s.now()
	cmd.V = control.SchemaVersion
	cmd.ID = control.NewID(now)
	cmd.Time = now.UTC()
	cmd.By = control.ByWeb
	res, err := ws.Source.Steer(r.Context(), cmd)
	var ie *control.InputError
	switch {
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, ie.Msg)
	case err != nil && isSystemError(err):
		writeError(w, http.StatusInternalServerError, err.Error())
	case err != nil:
		// The command is right but the workspace is not in a state to
		// take it (nothing to pause, nothing paused): a conflict.
		writeError(w, http.StatusConflict, err.Error())
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// isSystemError tells a failure of the machine (a file that could not be
// written) from a command the workspace refuses as it stands.
func isSystemError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}
