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
	act, ok := readSessionAction(w, r)
	if !ok {
		return
	}
	entry, _ := json.Marshal(timeline.Event{Kind: timeline.KindEvent, Event: timeline.EventHandback, Session: act.id,
		At: clock.Wall.Now().UTC(), Reason: act.reason, By: act.who})
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	found, err := s.d.Admin.EndHandoff(ctx, act.id, entry)
	if errors.Is(err, store.ErrNotHandedOff) {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "the session is not handed off to a person"})
		return
	}
	if !s.sessionFound(w, "hand back", act.id, found, err) {
		return
	}
	s.d.Log.Warn("admin: session handed back to the model", act.logArgs(r)...)
	writeJSON(w, http.StatusOK, map[string]any{"handedBack": true, "session": act.id})
}
