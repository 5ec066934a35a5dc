// Package stages timestamps where a typed turn's first text.delta spends
// its time, stage by stage, for BenchmarkTextFirstDelta's breakdown
// (docs/benchmarks.md). It records nothing unless the binary is built with
// -tags stages: then Mark stores the wall time of a stage's first mark
// since the last Take. Without the tag Mark is an empty function the
// compiler removes, so the marks cost the hot path nothing.
package stages

// Stage is one point on the text path, in the order a turn passes them.
type Stage int

// The stages of a typed turn's first text.delta, and of the same request
// sent straight to the fake (Sent, FakeGot, FakeDecoded, FakeFirst,
// FirstChunk, ClientDelta).
const (
	Sent        Stage = iota // the browser stand-in writes its text frame (or the direct call starts)
	Read                     // the connection's reader has the frame
	Input                    // the conversation's goroutine acts on it
	Launched                 // the turn's goroutine is started, the store's round trip begins
	TurnRuns                 // the turn's goroutine runs
	Built                    // the model request is built (history, tools) and handed to the SDK
	FakeGot                  // the fake's handler has the request
	FakeDecoded              // the fake has decoded its body
	FakeFirst                // the fake has flushed its first chunk
	FirstChunk               // the SDK has parsed the first chunk (the adapter has it)
	Verdict                  // the store's round trip returned the turn's verdict
	Admitted                 // the turn has its verdict with the first chunk in hand
	DeltaQueued              // the first text.delta is in the send queue
	Wrote1                   // the connection's writer has written its first frame (turn.start)
	Wrote2                   // ... and its second (the first text.delta)
	ClientStart              // the browser stand-in has read turn.start
	ClientDelta              // ... and the first text.delta (or the direct call its first chunk)
	NumStages
)

var names = [NumStages]string{"sent", "read", "input", "launched", "turn-runs", "built", "fake-got",
	"fake-decoded", "fake-first", "first-chunk", "verdict", "admitted", "delta-queued", "wrote-1", "wrote-2",
	"client-start", "client-delta"}

func (s Stage) String() string { return names[s] }
