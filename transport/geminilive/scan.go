package geminilive

import (
	"bytes"
	"slices"

	"github.com/turnstile-gw/turnstile/internal/audiob64"
	"github.com/turnstile-gw/turnstile/transport"
)

// The fast path for the message a voice session receives dozens of times a
// second: model audio,
//
//	{"serverContent":{"modelTurn":{"role":"model","parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"…"}}]}}}
//
// in any key order and whitespace, with any number of such parts (up to
// maxAudioParts) and optionally the interrupted, generationComplete and
// turnComplete flags of serverContent. scanAudio recognises exactly that
// and decodes the base64 straight into the session's PCM buffer. Anything
// else — another field, a key spelt differently, a duplicate key, an escape
// or a control character in a string, a non-audio part, malformed JSON —
// makes it give up and leave the message to decodeMessage, which yields
// the same events (or the same error) as the SDK path always did.

// maxAudioParts bounds the parts of one message the fast path takes.
const maxAudioParts = 8

// scanAudio turns an audio-only message into events appended to
// s.events, their audio in s.pcm (taken from bufs when the session holds
// none; Recv gives it back once the events are returned). It reports
// false, with s.events untouched and s.pcm given back, for anything else.
func (s *Session) scanAudio(data []byte) bool {
	if s.pcm == nil {
		s.pcm = getBuf()
	}
	p := scanner{b: data}
	a := audioMessage{pcm: (*s.pcm)[:0]}
	ok := p.message(&a)
	*s.pcm = a.pcm[:0]
	if !ok {
		putBuf(s.pcm)
		s.pcm = nil
		return false
	}
	for _, sp := range a.spans[:a.n] {
		s.events = append(s.events, transport.LiveEvent{Kind: transport.LiveAudio, Audio: a.pcm[sp[0]:sp[1]]})
	}
	s.events = appendFlags(s.events, a.interrupted, a.generationComplete, a.turnComplete)
	return true
}

// audioMessage is what the fast path found in one message.
type audioMessage struct {
	pcm                                           []byte
	spans                                         [maxAudioParts][2]int // audio of each part, in pcm
	n                                             int                   // parts with audio
	parts                                         int                   // parts seen
	interrupted, generationComplete, turnComplete bool
}

// scanner reads JSON tokens from b, from offset i.
type scanner struct {
	b []byte
	i int
}

// message: {"serverContent":{...}} and nothing after it.
func (p *scanner) message(a *audioMessage) bool {
	if !p.byte('{') {
		return false
	}
	seen := false
	for first := true; ; first = false {
		key, done, ok := p.key(first)
		if !ok {
			return false
		}
		if done {
			break
		}
		if string(key) != "serverContent" || seen || !p.serverContent(a) {
			return false
		}
		seen = true
	}
	p.ws()
	return seen && p.i == len(p.b)
}

// serverContent: modelTurn and the three flags, each at most once.
func (p *scanner) serverContent(a *audioMessage) bool {
	if !p.byte('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := p.key(first)
		if !ok {
			return false
		}
		if done {
			return true
		}
		var bit uint8
		switch string(key) {
		case "modelTurn":
			bit, ok = 1, p.modelTurn(a)
		case "interrupted":
			bit = 2
			a.interrupted, ok = p.boolean()
		case "generationComplete":
			bit = 4
			a.generationComplete, ok = p.boolean()
		case "turnComplete":
			bit = 8
			a.turnComplete, ok = p.boolean()
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// modelTurn: a role (any string) and the parts, each at most once.
func (p *scanner) modelTurn(a *audioMessage) bool {
	if !p.byte('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := p.key(first)
		if !ok {
			return false
		}
		if done {
			return true
		}
		var bit uint8
		switch string(key) {
		case "role":
			bit = 1
			_, ok = p.str()
		case "parts":
			bit, ok = 2, p.parts(a)
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// parts: an array of {"inlineData":{...}} objects.
func (p *scanner) parts(a *audioMessage) bool {
	if !p.byte('[') {
		return false
	}
	if p.byte(']') {
		return true
	}
	for {
		if a.parts == maxAudioParts || !p.part(a) {
			return false
		}
		a.parts++
		if p.byte(']') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// part: exactly one member, inlineData, with a mimeType of audio/pcm and
// the data, each at most once. Empty data yields no event, as on the slow
// path.
func (p *scanner) part(a *audioMessage) bool {
	if !p.byte('{') {
		return false
	}
	key, done, ok := p.key(true)
	if !ok || done || string(key) != "inlineData" || !p.byte('{') {
		return false
	}
	var mime, data []byte
	var seen uint8
	for first := true; ; first = false {
		key, done, ok := p.key(first)
		if !ok {
			return false
		}
		if done {
			break
		}
		var bit uint8
		switch string(key) {
		case "mimeType":
			bit = 1
			mime, ok = p.str()
		case "data":
			bit = 2
			data, ok = p.base64()
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
	if !p.byte('}') || !bytes.HasPrefix(mime, []byte(audioOutMIME)) {
		return false
	}
	if len(data) == 0 {
		return true
	}
	start := len(a.pcm)
	a.pcm = slices.Grow(a.pcm, audiob64.DecodedLen(len(data)))
	n, err := audiob64.Decode(a.pcm[start:cap(a.pcm)], data)
	if err != nil {
		return false
	}
	a.pcm = a.pcm[:start+n]
	if n > 0 {
		a.spans[a.n] = [2]int{start, start + n}
		a.n++
	}
	return true
}

// key reads the next member's key and colon of an object whose '{' has
// been read; done reports the closing '}' instead.
func (p *scanner) key(first bool) (key []byte, done, ok bool) {
	if p.byte('}') {
		return nil, true, true
	}
	if !first && !p.byte(',') {
		return nil, false, false
	}
	key, ok = p.str()
	if !ok || !p.byte(':') {
		return nil, false, false
	}
	return key, false, true
}

// str reads a string without escapes or control characters (either sends
// the message to the slow path) and returns its raw contents.
func (p *scanner) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// base64 reads a string of base64 and leaves checking it to the base64
// decoder: only its closing quote is looked for. A backslash or a control
// character fails the decoding (neither is in the alphabet), except CR and
// LF, which the decoder would skip but JSON forbids raw: those are refused
// here.
func (p *scanner) base64() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	n := bytes.IndexByte(p.b[p.i:], '"')
	if n < 0 {
		return nil, false
	}
	s := p.b[p.i : p.i+n]
	if bytes.IndexByte(s, '\n') >= 0 || bytes.IndexByte(s, '\r') >= 0 {
		return nil, false
	}
	p.i += n + 1
	return s, true
}

// boolean reads true or false.
func (p *scanner) boolean() (v, ok bool) {
	p.ws()
	rest := p.b[p.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		p.i += 4
		return true, true
	case bytes.HasPrefix(rest, []byte("false")):
		p.i += 5
		return false, true
	}
	return false, false
}

// byte skips whitespace and reads c, if c is next.
func (p *scanner) byte(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}
