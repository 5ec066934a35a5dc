package fakeopenai

import (
	"net/http"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// ScriptBrain answers requests with a queue of steps, one step per request,
// and records every request it receives (Push, Requests, Remaining). An
// exhausted script answers HTTP 500 "script exhausted" so a test notices
// the unexpected extra call. It is safe for concurrent use.
type ScriptBrain = fakeserve.Script[Request, Reply]

// NewScript returns a brain that runs steps in order.
func NewScript(steps ...func(*Request) Reply) *ScriptBrain {
	return fakeserve.NewScript(scriptExhausted, steps...)
}

func scriptExhausted() Reply {
	return ErrorReply(http.StatusInternalServerError, "server_error", "", "script exhausted")
}

// Fixed is a script step that answers r whatever the request.
func Fixed(r Reply) func(*Request) Reply {
	return func(*Request) Reply { return r }
}
