package session

import (
	"testing"
	"time"
)

func TestBlocksStartShortAndEscalateToTheLastStep(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 10 * time.Minute, 2: time.Hour, 3: 24 * time.Hour, 9: 24 * time.Hour,
		0: 10 * time.Minute} {
		if got := blockCap(DefaultBlockSteps, n); got != want {
			t.Errorf("block %d capped at %v, want %v", n, got, want)
		}
	}
}
