package store

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
)

// A phone call's stream start carries the call identity this gateway
// signed in its webhook answer (telephony.Signer), valid for a few
// minutes. A signed start opens one stream: its signature is recorded, on
// every node, the first time a stream uses it, so that the same start sent
// again — by anyone who saw it — is refused however the first stream
// ended. The record is a plain key on the call's hash tag (beside the
// call's stream lease, CallLeases), kept a little longer than the start
// stays valid; one script records it and takes the lease, in one round
// trip.

//go:embed call_start.lua
var callStartLua string

var callStartScript = leaseScript(callStartLua)

func callStartKey(callSID, signature string) string {
	return "turnstile:call:{" + callSID + "}:start:" + signature
}

// CallStreamStart is a phone call's stream asking to start
// (StartCallStream).
type CallStreamStart struct {
	CallSID   string // the carrier's call id
	Signature string // the signature of the stream's signed start
	// ReplayTTL is how long the start's use is remembered: at least as
	// long as the start stays valid.
	ReplayTTL time.Duration
	// Holder is the stream's holder id in the call's lease group
	// (CallLeases, one stream per call), its lease expiring after
	// LeaseTTL; "": no lease is taken, only the start is recorded.
	Holder   string
	LeaseTTL time.Duration
}

// StartCallStream records the first use of a call's signed start and,
// when it is the first, takes the call's one stream lease for st.Holder
// (renewed and released as AcquireLease's): first is false for a start a
// stream used before, on any node, within ReplayTTL (no lease is taken
// then); admitted is false when another stream of the call holds the
// lease. One round trip (a script on the call's hash slot; the first call
// on a server that has not cached it costs two), sent once (script.go): a
// start sent again after its reply was lost would find its own record and
// refuse itself as a replay. The error is non-nil only when Redis did not
// answer; first and admitted are then false.
func (s *RedisStore) StartCallStream(ctx context.Context, st CallStreamStart) (first, admitted bool, err error) {
	if st.CallSID == "" || st.Signature == "" || st.ReplayTTL <= 0 || (st.Holder != "" && st.LeaseTTL <= 0) {
		return false, false, fmt.Errorf("call start: %+v: need a call, a signature and positive TTLs", st)
	}
	err = s.call(ctx, metrics.RedisCallStart, func(ctx context.Context) error {
		now := s.now()
		res, err := callStartScript.Run(ctx, s.c,
			[]string{callStartKey(st.CallSID, st.Signature), CallLeases(st.CallSID)},
			st.ReplayTTL.Milliseconds(), now.UnixMilli(), now.Add(st.LeaseTTL).UnixMilli(), st.Holder).Int64Slice()
		if err != nil {
			return fmt.Errorf("call start: %w", err)
		}
		if len(res) != 2 {
			return fmt.Errorf("call start: script answered %v", res)
		}
		first, admitted = res[0] == 1, res[1] == 1
		return nil
	})
	if err != nil {
		return false, false, err
	}
	return first, admitted, nil
}
