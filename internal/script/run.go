package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/clock"
)

// DefaultWait bounds the wait for each event from the gateway: a scripted
// turn answers at once, so only a stuck turn waits this long.
const DefaultWait = 30 * time.Second

// Target is the gateway a script runs against.
type Target struct {
	// URL is the gateway's public listener (http:// or https://).
	URL string
	// Header goes with the WebSocket upgrade (e.g. Authorization).
	Header http.Header
	// Model is the script brain of the gateway's fake Gemini server: the
	// runner pushes each turn's rounds onto it.
	Model *fakegemini.ScriptBrain
	// Wait bounds the wait for each event; 0 means DefaultWait.
	Wait time.Duration
}

// Run plays s against t and reports every turn: the mismatches found, or
// why the run had to stop (a turn whose model rounds did not line up with
// the script, a lost connection), in which case the later turns are
// reported skipped.
func Run(ctx context.Context, t Target, s *Script) *Report {
	rep := &Report{Script: s}
	started := clock.Wall.Now()
	defer func() { rep.Elapsed = clock.Wall.Since(started) }()
	c, err := dial(ctx, t)
	if err != nil {
		rep.Err = err
		return rep
	}
	defer func() { _ = c.conn.CloseNow() }()
	if _, err := c.start(ctx); err != nil {
		rep.Err = err
		return rep
	}
	var pending *confirmAnswer
	for i, turn := range s.Turns {
		tr := TurnReport{N: i + 1, Title: turnTitle(i+1, turn)}
		if rep.Err != nil {
			tr.Skipped = true
			rep.Turns = append(rep.Turns, tr)
			continue
		}
		begin := clock.Wall.Now()
		pending, err = c.playTurn(ctx, t.Model, turn, pending, &tr)
		tr.Elapsed = clock.Wall.Since(begin)
		if err != nil {
			tr.Err = err
			rep.Err = fmt.Errorf("%s: %w", tr.Title, err)
		}
		rep.Turns = append(rep.Turns, tr)
	}
	_ = c.conn.Close(websocket.StatusNormalClosure, "script done")
	return rep
}

// confirmAnswer is the answer the runner owes a confirm.request.
type confirmAnswer struct {
	token   string
	approve bool
}

// playTurn sends the turn's input (a user message, or the answer to the
// previous turn's confirmation), reads the browser's events up to
// turn.done and checks them. It returns the confirmation the next turn
// answers, and an error when the run cannot go on.
func (c *client) playTurn(ctx context.Context, model *fakegemini.ScriptBrain, turn Turn, answer *confirmAnswer,
	tr *TurnReport) (*confirmAnswer, error) {
	before := len(model.Requests())
	for _, r := range turn.Rounds {
		model.Push(fakegemini.Fixed(reply(r)))
	}
	var err error
	if turn.User != "" {
		err = c.send(ctx, map[string]any{"type": "text", "text": turn.User})
	} else {
		err = c.send(ctx, map[string]any{"type": "confirm", "token": answer.token, "approve": answer.approve})
	}
	if err != nil {
		return nil, err
	}
	evs, err := c.until(ctx, "turn.done")
	tr.Events = evs
	if err != nil {
		return nil, err
	}
	if asked := len(model.Requests()) - before; asked != len(turn.Rounds) {
		tr.fail("model rounds", fmt.Sprintf("%d (the script's rounds)", len(turn.Rounds)),
			fmt.Sprintf("the gateway asked the model %d times; the turn ended %s", asked, describeEnd(evs)))
		return nil, errors.New("the model rounds did not line up with the script: later turns would get this turn's rounds")
	}
	next := checkCalls(turn, evs, tr)
	checkTurn(turn.Expect, evs, tr)
	return next, nil
}

// reply is the fake model's answer for a round: its text (if any) and its
// calls in one message.
func reply(r Round) fakegemini.Reply {
	if len(r.Calls) == 0 {
		return fakegemini.TextReply(r.Text, 1)
	}
	calls := make([]fakegemini.Call, len(r.Calls))
	for i, c := range r.Calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		calls[i] = fakegemini.Call{Name: c.Tool, Args: args}
	}
	return fakegemini.Reply{Chunks: []fakegemini.Chunk{{Text: r.Text, Calls: calls, FinishReason: "STOP"}}}
}

func turnTitle(n int, t Turn) string {
	if t.User == "" {
		return fmt.Sprintf("turn %d (the confirmation's answer)", n)
	}
	u := t.User
	if r := []rune(u); len(r) > 40 {
		u = string(r[:40]) + "…"
	}
	return fmt.Sprintf("turn %d (%q)", n, u)
}

// describeEnd says how a turn ended, from its turn.done and error events.
func describeEnd(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		switch e.Type() {
		case "turn.done":
			fmt.Fprintf(&b, "with reason %s", e.Str("reason"))
		case "error":
			fmt.Fprintf(&b, "after an error %s (%s); ", e.Str("code"), e.Str("message"))
		}
	}
	return b.String()
}

// Event is one event the browser received.
type Event map[string]any

// Type is the event's type.
func (e Event) Type() string { return e.Str("type") }

// Str is a string field of the event, "" when absent.
func (e Event) Str(k string) string {
	s, _ := e[k].(string)
	return s
}

// client is the browser's side of one session.
type client struct {
	conn *websocket.Conn
	wait time.Duration
}

func dial(ctx context.Context, t Target) (*client, error) {
	wait := t.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	u := "ws" + strings.TrimPrefix(t.URL, "http") + "/v1/ws"
	conn, _, err := websocket.Dial(dctx, u, &websocket.DialOptions{Subprotocols: []string{"turnstile.v1"}, HTTPHeader: t.Header})
	if err != nil {
		return nil, fmt.Errorf("connect to the gateway: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	return &client{conn: conn, wait: wait}, nil
}

// start opens a text session and returns session.ready.
func (c *client) start(ctx context.Context) (Event, error) {
	if err := c.send(ctx, map[string]any{"type": "session.start", "mode": "text"}); err != nil {
		return nil, err
	}
	evs, err := c.until(ctx, "session.ready")
	if err != nil {
		return nil, fmt.Errorf("start the session: %w", err)
	}
	return evs[len(evs)-1], nil
}

func (c *client) send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	if err := c.conn.Write(wctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("send %s: %w", v.(map[string]any)["type"], err)
	}
	return nil
}

// until reads events up to and including the first of type typ.
func (c *client) until(ctx context.Context, typ string) ([]Event, error) {
	var evs []Event
	for {
		rctx, cancel := context.WithTimeout(ctx, c.wait)
		kind, b, err := c.conn.Read(rctx)
		cancel()
		if err != nil {
			if code := websocket.CloseStatus(err); code != -1 {
				return evs, fmt.Errorf("the gateway closed the connection (%d) before %s", code, typ)
			}
			return evs, fmt.Errorf("no %s within %v: %w", typ, c.wait, err)
		}
		if kind != websocket.MessageText {
			continue // audio: a text session has none, but it would not be an event
		}
		var ev Event
		if err := json.Unmarshal(b, &ev); err != nil {
			return evs, fmt.Errorf("the gateway sent invalid JSON %q: %w", b, err)
		}
		evs = append(evs, ev)
		if ev.Type() == typ {
			return evs, nil
		}
	}
}
