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
	cmd, code, err := decodeCommand(w, r)
	if err != nil {
		writeError(w, code, err.Error())
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

// decodeCommand reads the one command in r's body, and says with an
// HTTP status what is wrong with a body that is not exactly one: a body
// over maxControlBody is 413, not a truncated "unexpected EOF"; anything
// after the object (a second command) is refused rather than dropped.
func decodeCommand(w http.ResponseWriter, r *http.Request) (control.Command, int, error) {
	var cmd control.Command
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(&cmd)
	var mbe *http.MaxBytesError
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
			if errors.As(terr, &mbe) {
				err = terr
			}
		}
	}
	switch {
	case err == nil:
		return cmd, 0, nil
	case errors.As(err, &mbe):
		return cmd, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is too large: a control command is at most %d bytes (a hint's text at most 16 KiB); nothing was done", maxControlBody)
	case err == errTrailing:
		return cmd, http.StatusBadRequest, errors.New("the body has more after the command's JSON object: send one command per request; nothing was done")
	}
	return cmd, http.StatusBadRequest, fmt.Errorf("the body is not a control command in JSON (%v); for example {\"command\": \"hint\", \"text\": \"use the existing HTTP client\"}", err)
}

var errTrailing = errors.New("trailing data")

// isSystemError tells a failure of the machine (a file that could not be
// written) from a command the workspace refuses as it stands.
func isSystemError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}
