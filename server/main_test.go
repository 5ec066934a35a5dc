package server

import (
	"testing"

	"go.uber.org/goleak"
)

// The edge serves connections on the HTTP server's goroutines; none may
// outlive a test. genai (through opencensus) starts a process-lifetime
// worker when linked in.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
