package redistest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartServesAndCleanupStopsServer(t *testing.T) {
	var addr string
	t.Run("running", func(t *testing.T) {
		addr = Start(t)
		if err := ping(addr); err != nil {
			t.Fatalf("server at %s does not answer PING: %v", addr, err)
		}
	})
	if err := ping(addr); err == nil {
		t.Fatalf("server at %s still answers after its test ended", addr)
	}
}

func TestStartGivesEachTestItsOwnServer(t *testing.T) {
	a, b := Start(t), Start(t)
	if a == b {
		t.Fatalf("two servers share address %s", a)
	}
	for _, addr := range []string{a, b} {
		if err := ping(addr); err != nil {
			t.Errorf("server at %s does not answer PING: %v", addr, err)
		}
	}
}
