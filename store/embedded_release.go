package store

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memRelease returns to the OS the heap pages that a burst of script calls
// left behind, once the burst is over. miniredis builds a Lua state for
// every script call (embedded_lua.go), so a burst of session starts leaves
// about a megabyte of short-lived garbage per voice session: the heap
// grows to the collector's target on the way, and Go keeps the freed pages
// resident as long as the heap stays under that target, which a node whose
// voice path allocates nothing never reaches again (docs/benchmarks.md,
// "Memory with the embedded store", and its second pass).
//
// At an expiry tick (ExpiryTick) that finds the heap holding more than it
// keeps live by at least releaseMinBytes and a quarter of the live heap,
// and the process allocating less in the tick before than a quarter of
// that (the burst is over: the pages would not be used again within a few
// ticks), it runs debug.FreeOSMemory — a collection and the return of
// every free page — at most once every releaseInterval. Its cost is one
// collection (marking the live heap) per release, bounded by both
// conditions: never more than one for every quarter of the live heap
// returned, never under steady allocation.
type memRelease struct {
	samples [4]metrics.Sample
	allocs  uint64    // bytes allocated by the process at the last look
	last    time.Time // the last release, on the store's clock
}

const (
	releaseMinBytes = 4 << 20
	releaseInterval = 10 * time.Second
)

func newMemRelease() *memRelease {
	r := &memRelease{}
	r.samples[0].Name = "/gc/heap/allocs:bytes"
	r.samples[1].Name = "/gc/heap/live:bytes"
	r.samples[2].Name = "/memory/classes/heap/objects:bytes"
	r.samples[3].Name = "/memory/classes/heap/free:bytes"
	r.read()
	return r
}

// read samples the heap and reports the bytes allocated since the last
// read, what the heap holds beyond its live bytes (garbage not yet
// collected and free pages not yet returned), and the live bytes.
func (r *memRelease) read() (allocated, spare, live uint64) {
	metrics.Read(r.samples[:])
	allocs := r.samples[0].Value.Uint64()
	allocated, r.allocs = allocs-r.allocs, allocs
	live = r.samples[1].Value.Uint64()
	held := r.samples[2].Value.Uint64() + r.samples[3].Value.Uint64()
	if held > live {
		spare = held - live
	}
	return allocated, spare, live
}

// due samples the heap and reports whether now is the time to return its
// spare pages. It is called once a tick, by one goroutine at a time.
func (r *memRelease) due(now time.Time) bool {
	allocated, spare, live := r.read()
	if spare < max(releaseMinBytes, live/4) || allocated > spare/4 || now.Sub(r.last) < releaseInterval {
		return false
	}
	r.last = now
	return true
}

// release returns the heap's free pages to the OS (after a collection).
func release() { debug.FreeOSMemory() }
