package session

import "sync/atomic"

// ownership is the epoch a connection holds its session with, and the
// newest epoch the store announced for that session (fence.go). The
// session's start, the store's watcher and the node's checks use it at
// once; it takes no lock.
type ownership struct {
	own, seen atomic.Int64 // 0: not known yet
}

// take records the connection's own epoch once its session is loaded; it
// reports false when a newer one was announced already.
func (o *ownership) take(epoch int64) bool {
	o.own.Store(epoch)
	return o.seen.Load() <= epoch
}

// announce notes that epoch owns the session; it reports whether that
// ends this connection's hold: an epoch newer than its own, once its own
// is known (an announcement before that is kept for take).
func (o *ownership) announce(epoch int64) bool {
	for {
		old := o.seen.Load()
		if epoch <= old || o.seen.CompareAndSwap(old, epoch) {
			break
		}
	}
	own := o.own.Load()
	return own != 0 && epoch > own
}

// epoch is the connection's own epoch; 0 until its session is loaded.
func (o *ownership) epoch() int64 { return o.own.Load() }

// current reports whether the connection holds its session and no newer
// owner has been announced.
func (o *ownership) current() bool {
	own := o.own.Load()
	return own != 0 && o.seen.Load() <= own
}
