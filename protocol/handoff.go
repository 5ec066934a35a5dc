package protocol

// The messages of a hand-off to a person (request_human); their types are
// TypeHandoff, TypeHandoffPending and TypeHandoffEnded.

// Handoff tells the browser that a person takes over: why, and the
// summary the model wrote for that person. Turn is the turn the model
// asked in (0 when sent again after a resume); At is RFC 3339.
type Handoff struct {
	Turn    int    `json:"turn"`
	Reason  string `json:"reason"`
	Summary string `json:"summary,omitempty"`
	At      string `json:"at"`
}

// HandoffPending answers a message the model will not see.
type HandoffPending struct {
	Message string `json:"message"`
}

// HandoffEnded tells the browser that the model has the conversation
// again.
type HandoffEnded struct{}
