package fakegemini

import (
	"encoding/json"
	"sync"
)

// callState is where a Live tool call stands, for strict mode.
type callState int

const (
	callPending   callState = iota + 1 // sent, not answered yet
	callAnswered                       // a final response arrived
	callCancelled                      // withdrawn by toolCallCancellation
)

// liveTurn is what strict mode knows about a connection's model turn and
// tool calls, updated as server frames are written and read as client
// frames arrive.
type liveTurn struct {
	mu       sync.Mutex
	speaking bool // between the turn's first model output and its turnComplete
	calls    map[string]callState
}

// frameNote is what a server frame tells strict mode.
type frameNote struct {
	output  bool // model output: a modelTurn part, an outputTranscription or a toolCall
	turnEnd bool // turnComplete
	calls   []string
	cancels []string
}

// observeFrame reads a server frame for strict mode.
func observeFrame(data []byte) frameNote {
	var m struct {
		ServerContent *struct {
			ModelTurn           json.RawMessage `json:"modelTurn"`
			OutputTranscription json.RawMessage `json:"outputTranscription"`
			TurnComplete        bool            `json:"turnComplete"`
		} `json:"serverContent"`
		ToolCall *struct {
			FunctionCalls []struct {
				ID string `json:"id"`
			} `json:"functionCalls"`
		} `json:"toolCall"`
		ToolCallCancellation *struct {
			IDs []string `json:"ids"`
		} `json:"toolCallCancellation"`
	}
	var n frameNote
	if json.Unmarshal(data, &m) != nil {
		return n // a test's raw frame that is not JSON: nothing to learn
	}
	if sc := m.ServerContent; sc != nil {
		n.output = len(sc.ModelTurn) > 0 && string(sc.ModelTurn) != "null" ||
			len(sc.OutputTranscription) > 0 && string(sc.OutputTranscription) != "null"
		n.turnEnd = sc.TurnComplete
	}
	if tc := m.ToolCall; tc != nil {
		n.output = true
		for _, c := range tc.FunctionCalls {
			n.calls = append(n.calls, c.ID)
		}
	}
	if c := m.ToolCallCancellation; c != nil {
		n.cancels = c.IDs
	}
	return n
}

// apply records what a frame about to be written tells.
func (t *liveTurn) apply(n frameNote) {
	if !n.output && !n.turnEnd && len(n.calls) == 0 && len(n.cancels) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.output {
		t.speaking = true
	}
	if n.turnEnd {
		t.speaking = false
	}
	for _, id := range n.calls {
		if t.calls == nil {
			t.calls = make(map[string]callState)
		}
		t.calls[id] = callPending
	}
	for _, id := range n.cancels {
		if t.calls[id] == callPending {
			t.calls[id] = callCancelled
		}
	}
}

// checkClientEvents applies strict mode's Live rules to one client frame's
// events, recording violations. It returns false when the frame is one the
// real service refuses (the connection is then closed with 1007).
func (s *LiveSession) checkClientEvents(evs []ClientEvent) bool {
	ok := true
	s.turn.mu.Lock()
	defer s.turn.mu.Unlock()
	for _, ev := range evs {
		switch ev.Kind {
		case EventClientContent:
			if s.turn.speaking {
				s.srv.violate("Live %s: clientContent %q (turnComplete %v) sent while the model is speaking; "+
					"it interrupts the model's turn: send it after turnComplete", s.ID, ev.UserText(), ev.TurnComplete)
			}
		case EventToolResponse:
			for _, r := range ev.FunctionResponses {
				if r != nil && !s.checkToolResponse(r.ID, r.Name, r.WillContinue != nil && *r.WillContinue) {
					ok = false
				}
			}
		}
	}
	return ok
}

// checkToolResponse checks one function response against the calls of
// the connection; the caller holds s.turn.mu.
func (s *LiveSession) checkToolResponse(id, name string, willContinue bool) bool {
	st := s.turn.calls[id]
	switch {
	case id == "":
		s.srv.violate("Live %s: toolResponse for %s has no id", s.ID, name)
		return false
	case st == 0:
		s.srv.violate("Live %s: toolResponse %s has id %q, which matches no toolCall of this connection", s.ID, name, id)
		return false
	case st == callAnswered:
		s.srv.violate("Live %s: toolResponse %s answers call %q a second time", s.ID, name, id)
		return false
	}
	if !willContinue || st == callCancelled {
		s.turn.calls[id] = callAnswered
	}
	return true
}
