package session

import "errors"

// A typed turn's first store write (the user's entry, the user's turns per
// minute, storage quota and block, the session's fencing) decides whether
// the turn may run. Its round trip runs alongside the building of the
// turn's first model request rather than before it: the turn starts at
// once, and its adapter waits for the store's answer before it sends the
// request (textturn.Deps.Admitted, transport.TextRequest.Admit). A refused
// turn reaches no model — a user blocked on another node whose
// announcement has not arrived yet included — shows nothing, runs no tool
// and commits nothing (a TextModel that does not ask sends its request,
// which is cancelled). After a refusal the next turn waits for the store's
// answer before it starts at all.

// errNotAdmitted is the cause that cancels a refused turn's early request.
var errNotAdmitted = errors.New("turn refused by the store's verdict")

// admission is a turn's verdict, decided once by startTextTurn
// and awaited by the turn.
type admission struct {
	decided chan struct{}
	ok      bool
}

func newAdmission() *admission { return &admission{decided: make(chan struct{})} }

// decide gives the verdict; it is called exactly once.
func (a *admission) decide(ok bool) {
	a.ok = ok
	close(a.decided)
}

// wait blocks until the verdict is given and returns it.
func (a *admission) wait() bool {
	<-a.decided
	return a.ok
}
