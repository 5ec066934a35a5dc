// Package loopdetect spots a model going round in circles within one turn:
// calling the same tool with the same arguments again and again, or calling
// a tool that keeps coming back empty. It knows nothing about providers or
// tools beyond their names; arguments are compared by a digest of their
// canonical form, so it never holds the arguments themselves.
package loopdetect

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// Rule names why a call is refused as a loop.
type Rule string

const (
	// RepeatedCall: the turn already holds maxIdenticalCalls calls of the
	// tool with the same canonical arguments.
	RepeatedCall Rule = "repeated_call"
	// EmptyResults: the tool already came back empty maxEmptyResults times
	// in the turn, and this call repeats arguments that came back empty.
	// Calls with other arguments stay allowed: different search terms may
	// find something.
	EmptyResults Rule = "empty_results"
)

// Rules lists every rule.
var Rules = []Rule{RepeatedCall, EmptyResults}

const (
	// maxIdenticalCalls identical calls are allowed per turn; the next one
	// is refused.
	maxIdenticalCalls = 2
	// maxEmptyResults empty results of a tool are tolerated per turn; after
	// them, a call repeating arguments that came back empty is refused.
	maxEmptyResults = 2
)

// Detector keeps per-turn call history for one session. It is safe for
// concurrent use; every method holds one mutex for a few map operations.
type Detector struct {
	keep int

	mu     sync.Mutex
	latest int // highest turn seen; meaningful once turns is non-empty
	turns  map[int]*turnState
}

type turnState struct {
	tools map[string]*toolState
}

type toolState struct {
	calls      int
	args       map[string]int // digest -> calls with it
	empty      int
	emptyArgs  map[string]bool // digests whose call came back empty
	detections map[Rule]int
}

// New returns a detector that remembers the last keepTurns turns (counting
// the newest turn seen); older turns are forgotten, and calls or results
// recorded for them are ignored. keepTurns below 1 is taken as 1.
func New(keepTurns int) *Detector {
	return &Detector{keep: max(keepTurns, 1), turns: map[int]*turnState{}}
}

// Check reports whether a call of tool with the given argument digest in
// turn would be a loop, and by which rule. When both rules apply it reports
// EmptyResults, whose advice (stop, nothing is there) is the more useful.
// A refusal is counted as a detection in Snapshot; Check does not record
// the call itself, see RecordCall and CheckAndRecord.
func (d *Detector) Check(turn int, tool, argsDigest string) (Rule, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.check(turn, tool, argsDigest)
}

// RecordCall notes that a call of tool with the given argument digest was
// let through in turn.
func (d *Detector) RecordCall(turn int, tool, argsDigest string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.record(turn, tool, argsDigest)
}

// CheckAndRecord is Check followed, when the call is not a loop, by
// RecordCall, as one step: parallel calls of one turn that go through it
// are judged in the order they reach it, so two identical concurrent calls
// cannot both slip past the limit.
func (d *Detector) CheckAndRecord(turn int, tool, argsDigest string) (Rule, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rule, loop := d.check(turn, tool, argsDigest); loop {
		return rule, true
	}
	d.record(turn, tool, argsDigest)
	return "", false
}

// RecordResult notes the outcome of a call of tool with the given argument
// digest in turn; empty is whether the result had nothing in it (see
// IsEmptyResult).
func (d *Detector) RecordResult(turn int, tool, argsDigest string, empty bool) {
	if !empty {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ts := d.tool(turn, tool, true); ts != nil {
		ts.empty++
		if ts.emptyArgs == nil {
			ts.emptyArgs = map[string]bool{}
		}
		ts.emptyArgs[argsDigest] = true
	}
}

func (d *Detector) check(turn int, tool, argsDigest string) (Rule, bool) {
	ts := d.tool(turn, tool, false)
	if ts == nil {
		return "", false
	}
	var rule Rule
	switch {
	case ts.empty >= maxEmptyResults && ts.emptyArgs[argsDigest]:
		rule = EmptyResults
	case ts.args[argsDigest] >= maxIdenticalCalls:
		rule = RepeatedCall
	default:
		return "", false
	}
	if ts.detections == nil {
		ts.detections = map[Rule]int{}
	}
	ts.detections[rule]++
	return rule, true
}

func (d *Detector) record(turn int, tool, argsDigest string) {
	if ts := d.tool(turn, tool, true); ts != nil {
		ts.calls++
		ts.args[argsDigest]++
	}
}

// tool returns the state of tool in turn, or nil when there is none. With
// create it makes the state, unless turn is older than the history kept; a
// turn newer than any seen so far forgets the turns that fall out of the
// window.
func (d *Detector) tool(turn int, tool string, create bool) *toolState {
	if !create {
		if st := d.turns[turn]; st != nil {
			return st.tools[tool]
		}
		return nil
	}
	if len(d.turns) == 0 || turn > d.latest {
		d.latest = turn
		for t := range d.turns {
			if t <= turn-d.keep {
				delete(d.turns, t)
			}
		}
	} else if turn <= d.latest-d.keep {
		return nil
	}
	st := d.turns[turn]
	if st == nil {
		st = &turnState{tools: map[string]*toolState{}}
		d.turns[turn] = st
	}
	ts := st.tools[tool]
	if ts == nil {
		ts = &toolState{args: map[string]int{}}
		st.tools[tool] = ts
	}
	return ts
}

// TurnState is one remembered turn, for a JSON status view.
type TurnState struct {
	Turn  int         `json:"turn"`
	Tools []ToolState `json:"tools"`
}

// ToolState is what a turn holds for one tool. It carries counts only,
// never arguments or their digests.
type ToolState struct {
	Tool         string       `json:"tool"`
	Calls        int          `json:"calls"`
	DistinctArgs int          `json:"distinctArgs"`
	EmptyResults int          `json:"emptyResults"`
	Detections   map[Rule]int `json:"detections,omitempty"`
}

// Turns is how many turns the detector holds state for (at most the
// keepTurns it was made with), at the cost of one lock.
func (d *Detector) Turns() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.turns)
}

// Snapshot returns the remembered turns, oldest first, tools by name.
func (d *Detector) Snapshot() []TurnState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]TurnState, 0, len(d.turns))
	for turn, st := range d.turns {
		ts := TurnState{Turn: turn, Tools: make([]ToolState, 0, len(st.tools))}
		for name, s := range st.tools {
			ts.Tools = append(ts.Tools, ToolState{Tool: name, Calls: s.calls, DistinctArgs: len(s.args),
				EmptyResults: s.empty, Detections: maps.Clone(s.detections)})
		}
		slices.SortFunc(ts.Tools, func(a, b ToolState) int { return cmp.Compare(a.Tool, b.Tool) })
		out = append(out, ts)
	}
	slices.SortFunc(out, func(a, b TurnState) int { return cmp.Compare(a.Turn, b.Turn) })
	return out
}
