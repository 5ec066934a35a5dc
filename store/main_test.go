package store

import (
	"testing"

	"go.uber.org/goleak"
)

// genai (through opencensus, linked in via tools) starts a worker when its
// package loads; it lives as long as the process and is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
