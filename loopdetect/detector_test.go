package loopdetect_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/turnstile-gw/turnstile/loopdetect"
)

// The concurrency test starts goroutines; none may outlive it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	search = "kb_search"
	get    = "kb_get"
	argsA  = "digest-a"
	argsB  = "digest-b"
)

// call runs a call through the detector the way the orchestrator does:
// check, and record it when it is let through.
func call(d *loopdetect.Detector, turn int, tool, digest string) (loopdetect.Rule, bool) {
	rule, loop := d.Check(turn, tool, digest)
	if !loop {
		d.RecordCall(turn, tool, digest)
	}
	return rule, loop
}

func TestDetectorAllowsTwoIdenticalCallsAndRefusesTheThird(t *testing.T) {
	d := loopdetect.New(5)
	for i := range 2 {
		if rule, loop := call(d, 1, search, argsA); loop {
			t.Fatalf("identical call %d refused (%s), want allowed", i+1, rule)
		}
	}
	rule, loop := call(d, 1, search, argsA)
	if !loop || rule != loopdetect.RepeatedCall {
		t.Fatalf("third identical call = (%q, %v), want (%q, true)", rule, loop, loopdetect.RepeatedCall)
	}
	// It stays refused: refusals are not recorded as calls, but the two
	// earlier ones still count.
	if rule, loop := call(d, 1, search, argsA); !loop || rule != loopdetect.RepeatedCall {
		t.Fatalf("fourth identical call = (%q, %v), want refused", rule, loop)
	}
}

func TestDetectorAllowsSameToolWithDifferentArgs(t *testing.T) {
	d := loopdetect.New(5)
	call(d, 1, search, argsA)
	call(d, 1, search, argsA)
	if rule, loop := call(d, 1, search, argsB); loop {
		t.Fatalf("call with different args refused (%s)", rule)
	}
	if rule, loop := call(d, 1, get, argsA); loop {
		t.Fatalf("other tool with the same digest refused (%s)", rule)
	}
}

func TestDetectorRefusesRepeatingEmptyArgsAfterTwoEmptyResultsButAllowsNewTerms(t *testing.T) {
	d := loopdetect.New(5)
	call(d, 1, search, argsA)
	d.RecordResult(1, search, argsA, true)
	if rule, loop := call(d, 1, search, argsA); loop {
		t.Fatalf("second identical call after one empty result refused (%s)", rule)
	}
	if rule, loop := call(d, 1, search, argsB); loop {
		t.Fatalf("call after one empty result refused (%s)", rule)
	}
	d.RecordResult(1, search, argsB, true)
	// Two empty results: repeating a request that found nothing is refused...
	for _, digest := range []string{argsA, argsB} {
		rule, loop := d.Check(1, search, digest)
		if !loop || rule != loopdetect.EmptyResults {
			t.Fatalf("repeating %s after two empty results = (%q, %v), want (%q, true)", digest, rule, loop, loopdetect.EmptyResults)
		}
	}
	// ...but different search terms stay allowed.
	if rule, loop := d.Check(1, search, "digest-never-seen"); loop {
		t.Fatalf("new search terms refused (%s) after two empty results", rule)
	}
	// The rule is per tool: another tool is still fine.
	if rule, loop := d.Check(1, get, argsA); loop {
		t.Fatalf("other tool refused (%s) after %s came back empty", rule, search)
	}
}

func TestDetectorIgnoresNonEmptyResults(t *testing.T) {
	d := loopdetect.New(5)
	for _, digest := range []string{"1", "2", "3", "4"} {
		call(d, 1, search, digest)
		d.RecordResult(1, search, digest, false)
	}
	call(d, 1, search, "5")
	d.RecordResult(1, search, "5", true)
	if rule, loop := d.Check(1, search, "5"); loop {
		t.Fatalf("refused (%s) with four full results and one empty", rule)
	}
}

func TestDetectorReportsEmptyResultsWhenBothRulesApply(t *testing.T) {
	d := loopdetect.New(5)
	for range 2 {
		call(d, 1, search, argsA)
		d.RecordResult(1, search, argsA, true)
	}
	if rule, loop := d.Check(1, search, argsA); !loop || rule != loopdetect.EmptyResults {
		t.Fatalf("got (%q, %v), want (%q, true)", rule, loop, loopdetect.EmptyResults)
	}
}

func TestDetectorStartsEachTurnAfresh(t *testing.T) {
	d := loopdetect.New(5)
	for range 2 {
		call(d, 1, search, argsA)
		d.RecordResult(1, search, argsA, true)
	}
	if _, loop := d.Check(1, search, argsA); !loop {
		t.Fatal("turn 1 should refuse by now")
	}
	for i := range 2 {
		if rule, loop := call(d, 2, search, argsA); loop {
			t.Fatalf("turn 2 call %d refused (%s); counters must be per turn", i+1, rule)
		}
	}
	if _, loop := d.Check(2, search, argsA); !loop {
		t.Fatal("turn 2 third identical call allowed")
	}
}

func TestDetectorKeepsOnlyTheLastTurns(t *testing.T) {
	const keep = 3
	d := loopdetect.New(keep)
	for turn := 1; turn <= 10; turn++ {
		call(d, turn, search, argsA)
		d.RecordResult(turn, search, argsA, true)
		snap := d.Snapshot()
		if len(snap) > keep {
			t.Fatalf("after turn %d the snapshot holds %d turns, want at most %d", turn, len(snap), keep)
		}
		if got := snap[len(snap)-1].Turn; got != turn {
			t.Fatalf("newest turn in snapshot = %d, want %d", got, turn)
		}
	}
	snap := d.Snapshot()
	var turns []int
	for _, ts := range snap {
		turns = append(turns, ts.Turn)
	}
	if fmt.Sprint(turns) != "[8 9 10]" {
		t.Fatalf("remembered turns = %v, want [8 9 10]", turns)
	}
	// A late call for a forgotten turn is not recorded anywhere.
	d.RecordCall(2, search, argsA)
	d.RecordResult(2, search, argsA, true)
	if got := len(d.Snapshot()); got != keep {
		t.Fatalf("recording into a forgotten turn changed the history to %d turns", got)
	}
	if _, loop := d.Check(2, search, argsA); loop {
		t.Fatal("forgotten turn refuses calls")
	}
}

func TestDetectorKeepsAtLeastOneTurn(t *testing.T) {
	d := loopdetect.New(0)
	call(d, 1, search, argsA)
	call(d, 1, search, argsA)
	if _, loop := d.Check(1, search, argsA); !loop {
		t.Fatal("keepTurns 0 must still detect loops within the current turn")
	}
	call(d, 2, search, argsA)
	if n := len(d.Snapshot()); n != 1 {
		t.Fatalf("keepTurns 0 remembers %d turns, want 1", n)
	}
}

func TestSnapshotCountsCallsArgsEmptiesAndDetections(t *testing.T) {
	d := loopdetect.New(5)
	call(d, 4, search, argsA)
	call(d, 4, search, argsA)
	call(d, 4, search, argsA) // refused: repeated_call
	call(d, 4, search, argsB)
	d.RecordResult(4, search, "x", true)
	call(d, 4, get, argsA)

	b, err := json.Marshal(d.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"turn":4,"tools":[` +
		`{"tool":"kb_get","calls":1,"distinctArgs":1,"emptyResults":0},` +
		`{"tool":"kb_search","calls":3,"distinctArgs":2,"emptyResults":1,"detections":{"repeated_call":1}}]}]`
	if string(b) != want {
		t.Fatalf("snapshot =\n%s\nwant\n%s", b, want)
	}
	if strings.Contains(string(b), argsA) {
		t.Fatal("snapshot exposes argument digests")
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	d := loopdetect.New(5)
	call(d, 1, search, argsA)
	call(d, 1, search, argsA)
	d.Check(1, search, argsA)
	snap := d.Snapshot()
	snap[0].Tools[0].Calls = 99
	snap[0].Tools[0].Detections[loopdetect.RepeatedCall] = 99
	again := d.Snapshot()
	if again[0].Tools[0].Calls != 2 || again[0].Tools[0].Detections[loopdetect.RepeatedCall] != 1 {
		t.Fatalf("changing a snapshot changed the detector: %+v", again[0].Tools[0])
	}
}

func TestCheckAndRecordAdmitsExactlyTwoOfManyConcurrentIdenticalCalls(t *testing.T) {
	d := loopdetect.New(5)
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, loop := d.CheckAndRecord(7, search, argsA); loop {
				refused.Add(1)
			} else {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 2 || refused.Load() != 48 {
		t.Fatalf("admitted %d, refused %d; want 2 and 48", admitted.Load(), refused.Load())
	}
}

func TestDetectorIsSafeForConcurrentUse(t *testing.T) {
	d := loopdetect.New(3)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				turn := i / 20
				tool := fmt.Sprintf("tool-%d", g%3)
				digest := fmt.Sprintf("d-%d", i%4)
				if _, loop := d.Check(turn, tool, digest); !loop {
					d.RecordCall(turn, tool, digest)
				}
				d.RecordResult(turn, tool, digest, i%5 == 0)
				d.CheckAndRecord(turn, tool, digest)
				_ = d.Snapshot()
			}
		})
	}
	wg.Wait()
	if n := len(d.Snapshot()); n > 3 {
		t.Fatalf("history holds %d turns, want at most 3", n)
	}
}

func TestFeedbackSuggestsAnotherWayAndNeverEchoesArguments(t *testing.T) {
	d := loopdetect.New(5)
	// The detector only ever sees digests, so this is the argument text a
	// careless implementation would have to invent; the real guard is that
	// the messages are fixed apart from the tool name.
	for _, rule := range []loopdetect.Rule{loopdetect.RepeatedCall, loopdetect.EmptyResults, "other"} {
		msg := d.Feedback(rule, search)
		if msg == "" {
			t.Fatalf("%s: empty feedback", rule)
		}
		lower := strings.ToLower(msg)
		if !strings.Contains(lower, "different") && !strings.Contains(lower, "another") {
			t.Errorf("%s: feedback %q suggests no other approach", rule, msg)
		}
		for _, leak := range []string{"{", "}", `"`, "digest", argsA} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: feedback %q contains %q", rule, msg, leak)
			}
		}
		if other := d.Feedback(rule, get); strings.ReplaceAll(other, get, search) != msg {
			t.Errorf("%s: feedback varies with more than the tool name:\n%q\n%q", rule, msg, other)
		}
	}
	if msg := d.Feedback(loopdetect.EmptyResults, search); !strings.Contains(msg,
		"Data may not exist. Try different search terms or a different tool.") {
		t.Errorf("empty-results feedback %q does not say what to do next in the spec's words", msg)
	}
	if msg := d.Feedback(loopdetect.RepeatedCall, search); !strings.Contains(msg, search) {
		t.Errorf("repeated-call feedback %q does not name the tool", msg)
	}
}
