package builtin

import (
	"sort"

	"github.com/turnstile-gw/turnstile/tools"
)

// constructors builds each built-in tool's handler, by tool name; every
// name has a folder of the same name here. It is never modified at run
// time. `gateway tools new` adds its line above the marker comment.
var constructors = map[string]func(Deps) (tools.Handler, error){
	"kb_search":           newKBSearch,
	"kb_get":              newKBGet,
	"ignore_user":         func(Deps) (tools.Handler, error) { return ignoreUser{}, nil },
	"start_voice_session": func(Deps) (tools.Handler, error) { return startVoice{}, nil },
	"end_voice_session":   func(Deps) (tools.Handler, error) { return endVoice{}, nil },
	"finish":              func(Deps) (tools.Handler, error) { return finish{}, nil },
	"request_human":       func(Deps) (tools.Handler, error) { return requestHuman{}, nil },
	// gateway tools new: new tools go above this line.
}

// Names returns the names of the built-in tools, sorted.
func Names() []string {
	return constructorNames()
}

func constructorNames() []string {
	out := make([]string, 0, len(constructors))
	for name := range constructors {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
