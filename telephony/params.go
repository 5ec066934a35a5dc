package telephony

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// The custom parameters the webhook's answer hands to the stream.
const (
	ParamCallSID   = "CallSid"
	ParamFrom      = "From"
	ParamTo        = "To"
	ParamIssued    = "TurnstileIssued"    // unix seconds
	ParamNonce     = "TurnstileNonce"     // random: two answers issued in one second differ
	ParamSignature = "TurnstileSignature" // base64url HMAC-SHA256 of the others
)

// ParamsMaxAge bounds how long after the webhook the stream may start:
// a carrier opens it within a second or two; a replayed start much later
// is refused.
const ParamsMaxAge = 5 * time.Minute

// ReplayWindow is how long a start accepted once must be remembered to
// refuse it when it is sent again: as long as Check accepts it, its age
// (ParamsMaxAge) plus the minute an issue time may lie ahead of this node's
// clock.
const ReplayWindow = ParamsMaxAge + paramsMaxSkew

// paramsMaxSkew is how far ahead of this node's clock an issue time may be.
const paramsMaxSkew = time.Minute

// ErrParams is a stream whose custom parameters are missing, unsigned,
// tampered with, stale, or for another call.
var ErrParams = errors.New("telephony: the stream's call parameters are not signed by this gateway")

// Signer signs the call identity the webhook's answer carries, so that the
// stream — which the carrier signs only by its URL — can trust who is
// calling, and turns a phone number into the pseudonym the session runs
// as. Every node of a fleet needs the same key.
type Signer struct {
	params, caller []byte // keys derived from the one configured
	now            func() time.Time
}

// NewSigner derives its keys from key; now is the clock (nil: the system clock).
func NewSigner(key []byte, now func() time.Time) *Signer {
	if now == nil {
		now = clock.Wall.Now
	}
	return &Signer{params: derive(key, "stream parameters"), caller: derive(key, "caller pseudonym"), now: now}
}

func derive(key []byte, purpose string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("turnstile telephony " + purpose))
	return mac.Sum(nil)
}

// Params are c's custom parameters, signed. Each answer's are its own (a
// random nonce): its signature names it, for refusing a replayed start.
func (s *Signer) Params(c Call) []Param {
	issued := strconv.FormatInt(s.now().Unix(), 10)
	n := make([]byte, 12)
	_, _ = rand.Read(n)
	nonce := base64.RawURLEncoding.EncodeToString(n)
	return []Param{{ParamCallSID, c.ID}, {ParamFrom, c.From}, {ParamTo, c.To}, {ParamIssued, issued},
		{ParamNonce, nonce}, {ParamSignature, s.sign(c, issued, nonce)}}
}

// sign is the parameters' signature. Without a nonce it is what nodes
// that issued none signed (a start in flight across an upgrade).
func (s *Signer) sign(c Call, issued, nonce string) string {
	mac := hmac.New(sha256.New, s.params)
	for _, v := range []string{c.ID, c.From, c.To, issued} {
		mac.Write([]byte(v))
		mac.Write([]byte{0})
	}
	if nonce != "" {
		mac.Write([]byte(nonce))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Check returns the call a stream's start parameters name when they carry
// this gateway's signature, are fresh, and belong to callSID (the call the
// stream's start names); otherwise ErrParams.
func (s *Signer) Check(params map[string]string, callSID string) (Call, error) {
	c := Call{ID: params[ParamCallSID], From: params[ParamFrom], To: params[ParamTo]}
	issued := params[ParamIssued]
	if c.ID == "" || c.ID != callSID {
		return Call{}, ErrParams
	}
	// Compared as sent, not decoded: a lenient decoder reads one MAC from
	// several spellings (the last character's spare bits), and the replay
	// check remembers the signature as sent.
	want := s.sign(c, issued, params[ParamNonce])
	if !hmac.Equal([]byte(params[ParamSignature]), []byte(want)) {
		return Call{}, ErrParams
	}
	at, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return Call{}, ErrParams
	}
	if age := s.now().Sub(time.Unix(at, 0)); age > ParamsMaxAge || age < -paramsMaxSkew {
		return Call{}, ErrParams
	}
	return c, nil
}

// Pseudonym is the user a caller's number runs as: stable for a number (so
// per-user limits, blocks and history follow the caller), and not the
// number itself (which stays out of the store, logs and metrics).
func (s *Signer) Pseudonym(number string) string {
	mac := hmac.New(sha256.New, s.caller)
	mac.Write([]byte(number))
	return "tel_" + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:15])
}
