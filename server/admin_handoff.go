package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/timeline"
)

// adminHandback hands a session the model handed to a person
// (request_human) back to the model: POST /admin/sessions/{id}/handback,
// optional body {"reason": "..."}. The node holding the session tells its
// browser handoff.ended; later messages go to the model again. 404: no
// such session; 409: it is not handed off.
func (s *Server) adminHandback(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body struct {
		Reason string `json:"reason"`
	}
	if !readAdminBody(w, r, &body) || !checkText(w, "reason", body.Reason, maxReason) {
		return
	}
	who, ok := operator(w, r)
	if !ok {
		return
	}
	ev := timeline.Event{Kind: timeline.KindEvent, Event: timeline.EventHandback, Session: id,
		At: clock.Wall.Now().UTC(), Reason: body.Reason, By: who}
	entry, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	found, err := s.d.Admin.EndHandoff(ctx, id, entry, entry)
	switch {
	case errors.Is(err, store.ErrNotHandedOff):
		writeJSON(w, http.StatusConflict, map[string]any{"error": "the session is not handed off to a person"})
		return
	case err != nil:
		s.d.Log.Warn("admin: cannot hand a session back", "session", id, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the session store is unavailable"})
		return
	case !found:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such session (unknown, or expired from the store)"})
		return
	}
	s.d.Log.Warn("admin: session handed back to the model", "session", id, "operator", who, "reason", body.Reason,
		"remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]any{"handedBack": true, "session": id})
}
