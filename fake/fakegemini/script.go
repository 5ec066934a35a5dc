package fakegemini

import (
	"net/http"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// ScriptBrain is fakeserve.Script (a queue of steps, one per request) for
// this API; an exhausted script answers HTTP 500 "script exhausted".
type ScriptBrain = fakeserve.Script[Request, Reply]

// NewScript returns a brain that runs steps in order.
func NewScript(steps ...func(*Request) Reply) *ScriptBrain {
	return fakeserve.NewScript(scriptExhausted, steps...)
}

func scriptExhausted() Reply {
	return ErrorReply(http.StatusInternalServerError, "INTERNAL", "script exhausted")
}

// Fixed is a script step that answers r whatever the request.
func Fixed(r Reply) func(*Request) Reply {
	return func(*Request) Reply { return r }
}
