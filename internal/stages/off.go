//go:build !stages

package stages

// On reports whether marks are recorded (built with -tags stages).
const On = false

// Mark records nothing without the stages build tag.
func Mark(Stage) {}

// Wrote records nothing without the stages build tag.
func Wrote() {}

// Take returns nothing without the stages build tag.
func Take() (t [NumStages]int64) { return t }
