package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/timeline"
)

// AdminStore is what the admin routes read and change: the store, as any
// node sees it.
type AdminStore interface {
	Timeline(ctx context.Context, id string) (store.SessionTimeline, error)
	LiveSessions(ctx context.Context, max int) ([]store.LiveSession, error)
	CloseSession(ctx context.Context, id, by string, event []byte) (bool, error)
	SetBlock(ctx context.Context, user string, b store.Block) error
	LiftBlock(ctx context.Context, user string) (bool, error)
	EndHandoff(ctx context.Context, id string, event []byte) (bool, error)
}

// Bounds of the admin routes.
const (
	// maxListed bounds the live sessions GET /admin/ lists.
	maxListed = 500
	// maxBlock is the longest block an operator may set.
	maxBlock = 366 * 24 * time.Hour
	// maxReason bounds an operator's reason and name.
	maxReason   = 200
	maxOperator = 64
	// adminTimeout bounds the store calls of one admin request.
	adminTimeout = 3 * time.Second
)

// operatorHeader names the operator acting, for the logs and the
// timeline; without it the action is "admin".
const operatorHeader = "Turnstile-Operator"

func (s *Server) adminRoutes() {
	s.admin.HandleFunc("GET /admin/{$}", s.adminList)
	s.admin.HandleFunc("GET /admin/sessions/{id}", s.adminTimeline)
	s.admin.HandleFunc("POST /admin/sessions/{id}/close", s.adminClose)
	s.admin.HandleFunc("POST /admin/sessions/{id}/handback", s.adminHandback)
	s.admin.HandleFunc("POST /admin/users/{id}/block", s.adminBlock)
	s.admin.HandleFunc("DELETE /admin/users/{id}/block", s.adminUnblock)
}

// LiveRow is one live session in GET /admin/.
type LiveRow struct {
	ID      string        `json:"id"`
	UserID  string        `json:"userId"`
	User    string        `json:"user"`
	Node    string        `json:"node"`
	Mode    protocol.Mode `json:"mode"`
	Created time.Time     `json:"created"`
	AgeSec  int64         `json:"ageSeconds"`
	Turns   int           `json:"turns"`
}

func (s *Server) adminList(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	live, err := s.d.Admin.LiveSessions(ctx, maxListed)
	if err != nil {
		s.d.Log.Warn("admin: cannot list live sessions", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the session store is unavailable"})
		return
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	now := clock.Wall.Now()
	rows := make([]LiveRow, 0, len(live))
	for _, l := range live {
		row := LiveRow{ID: l.ID, UserID: l.UserID, User: s.d.Sessions.Pseudonym(l.UserID), Node: l.Node, Mode: l.Mode,
			Created: l.CreatedAt.UTC(), AgeSec: int64(now.Sub(l.CreatedAt) / time.Second), Turns: l.Turn}
		if q == "" || strings.Contains(row.ID, q) || row.UserID == q || row.User == q {
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Created.After(rows[j].Created) })
	if wantsHTML(r) {
		renderHTML(w, listPage, map[string]any{"Rows": rows, "Query": q, "Max": maxListed})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": rows, "query": q})
}

func (s *Server) adminTimeline(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	st, err := s.d.Admin.Timeline(ctx, id)
	switch {
	case errors.Is(err, store.ErrSessionGone):
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such session (unknown, or expired from the store)"})
		return
	case err != nil:
		s.d.Log.Warn("admin: cannot read a timeline", "session", id, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the session store is unavailable"})
		return
	}
	view := timeline.View{Session: timeline.Session{ID: st.ID, UserID: st.UserID, User: s.d.Sessions.Pseudonym(st.UserID),
		Created: st.CreatedAt.UTC(), Mode: string(st.Mode), Turns: st.Turn, Node: st.Node, Closed: st.Closed,
		Profile: st.Profile, Voice: st.Voice, LanguageCode: st.LanguageCode,
		HandedOff: st.Handoff.Reason},
		Turns: []timeline.Turn{}, Events: []timeline.Event{}, Dropped: st.Full}
	if st.Context != "" && json.Valid([]byte(st.Context)) {
		view.Session.Context = json.RawMessage(st.Context)
	}
	for _, raw := range st.Entries {
		var kind struct{ Kind string }
		if json.Unmarshal([]byte(raw), &kind) != nil {
			continue
		}
		switch kind.Kind {
		case timeline.KindTurn:
			var t timeline.Turn
			if json.Unmarshal([]byte(raw), &t) == nil {
				view.Turns = append(view.Turns, t)
			}
		case timeline.KindEvent:
			var ev timeline.Event
			if json.Unmarshal([]byte(raw), &ev) == nil {
				view.Events = append(view.Events, ev)
			}
		}
	}
	if wantsHTML(r) {
		renderHTML(w, sessionPage, view)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (s *Server) adminClose(w http.ResponseWriter, r *http.Request) {
	act, ok := readSessionAction(w, r)
	if !ok {
		return
	}
	by := act.who
	if act.reason != "" {
		by += ": " + act.reason
	}
	ev, _ := json.Marshal(timeline.Event{Kind: timeline.KindEvent, Event: timeline.EventOperator, Session: act.id,
		At: clock.Wall.Now().UTC(), Reason: "close: " + act.reason, By: act.who})
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	found, err := s.d.Admin.CloseSession(ctx, act.id, by, ev)
	if !s.sessionFound(w, "close", act.id, found, err) {
		return
	}
	s.d.Log.Warn("admin: session closed by an operator", act.logArgs(r)...)
	writeJSON(w, http.StatusOK, map[string]any{"closed": true, "session": act.id})
}

// sessionAction is an operator's action on one session
// (POST /admin/sessions/{id}/..., optional body {"reason": "..."}).
type sessionAction struct{ id, reason, who string }

// readSessionAction reads a session action's path, body and operator; on
// false the request has been answered.
func readSessionAction(w http.ResponseWriter, r *http.Request) (sessionAction, bool) {
	act := sessionAction{id: r.PathValue("id")}
	var body struct {
		Reason string `json:"reason"`
	}
	if !readAdminBody(w, r, &body) || !checkText(w, "reason", body.Reason, maxReason) {
		return act, false
	}
	act.reason = body.Reason
	var ok bool
	act.who, ok = operator(w, r)
	return act, ok
}

// logArgs are the fields of the log line an action writes once done.
func (a sessionAction) logArgs(r *http.Request) []any {
	return []any{"session", a.id, "operator", a.who, "reason", a.reason, "remote", r.RemoteAddr}
}

// sessionFound answers a session action the store could not do (503) or
// whose session it does not hold (404); it reports whether the action was
// done.
func (s *Server) sessionFound(w http.ResponseWriter, what, id string, found bool, err error) bool {
	switch {
	case err != nil:
		s.d.Log.Warn("admin: cannot "+what+" a session", "session", id, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the session store is unavailable"})
		return false
	case !found:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such session (unknown, or expired from the store)"})
		return false
	}
	return true
}

func (s *Server) adminBlock(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("id")
	var body struct {
		Until  string `json:"until"`
		Reason string `json:"reason"`
	}
	if !readAdminBody(w, r, &body) || !checkText(w, "reason", body.Reason, maxReason) {
		return
	}
	until, err := time.Parse(time.RFC3339, body.Until)
	now := clock.Wall.Now()
	switch {
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "until must be an RFC 3339 time, e.g. 2030-01-02T15:04:05Z"})
		return
	case !until.After(now):
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "until must be in the future"})
		return
	case until.Sub(now) > maxBlock:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("a block lasts at most %d days", maxBlock/(24*time.Hour))})
		return
	}
	who, ok := operator(w, r)
	if !ok || !checkText(w, "user", user, 256) {
		return
	}
	reason := body.Reason
	if reason == "" {
		reason = "blocked by an operator"
	}
	b := store.Block{Until: until.UTC().Truncate(time.Second), Reason: reason}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	if err := s.d.Admin.SetBlock(ctx, user, b); err != nil {
		s.d.Log.Warn("admin: cannot block a user", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the session store is unavailable"})
		return
	}
	s.d.Log.Warn("admin: user blocked by an operator", "user", s.d.Sessions.Pseudonym(user), "until", b.Until,
		"reason", reason, "operator", who, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]any{"blocked": true, "until": b.Until.Format(time.RFC3339), "reason": reason})
}

func (s *Server) adminUnblock(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("id")
	who, ok := operator(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	had, err := s.d.Admin.LiftBlock(ctx, user)
	if err != nil {
		s.d.Log.Warn("admin: cannot lift a block", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the session store is unavailable"})
		return
	}
	s.d.Log.Warn("admin: user block lifted by an operator", "user", s.d.Sessions.Pseudonym(user), "had_block", had,
		"operator", who, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]any{"blocked": false, "hadBlock": had})
}

// operator names who acts: the Turnstile-Operator header, else "admin",
// with the address the request came from.
func operator(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.Header.Get(operatorHeader)
	if !checkText(w, operatorHeader, name, maxOperator) {
		return "", false
	}
	if name == "" {
		name = "admin"
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return name + "@" + host, true
}

// readAdminBody decodes an optional small JSON body into v.
func readAdminBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "the body must be a JSON object: " + err.Error()})
		return false
	}
	return true
}

// checkText refuses a value with control characters or over n bytes.
func checkText(w http.ResponseWriter, name, v string, n int) bool {
	if len(v) > n || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"error": fmt.Sprintf("%s must be at most %d bytes, without control characters", name, n)})
		return false
	}
	return true
}

// wantsHTML reports whether the client asked for a page rather than JSON.
func wantsHTML(r *http.Request) bool { return strings.Contains(r.Header.Get("Accept"), "text/html") }
