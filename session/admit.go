package session

import "errors"

// A typed turn's first store write (the user's entry, the user's turns per
// minute, storage quota and block, the session's fencing) decides whether
// the turn may run. Its round trip runs alongside the turn's first model
// request rather than before it: the request starts at once, and what it
// brings waits for the store's answer (textturn.Deps.Admitted). A refused
// turn shows nothing, runs no tool, commits nothing, and its request is
// cancelled. After a refusal the next turn waits for the store's answer
// before asking the model, so a user refused again and again (a flood, a
// storage quota used up) starts at most one model request per run of
// refusals.

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
