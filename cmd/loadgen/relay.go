package main

import (
	"context"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"time"

	"github.com/turnstile-gw/turnstile/audio"
)

// The relay load (-relay), the one relaybench holds voice relays to: every
// session streams 20 ms chunks of PCM16 16 kHz (640 bytes) continuously at
// real-time pace, each starting with an 8-byte probe header (sequence
// number and send time, uint32 LE each). The upstream echoes the header at
// the start of its answer (see echoUpstream), so every answer names the
// chunk it answers and when that was sent: a round trip per chunk, browser
// → gateway → upstream → gateway → browser.
//
// A phone call (-client twilio) sends 20 ms of μ-law instead (160 bytes,
// the frame Twilio sends), each chunk named by its tone (see callTones).
const (
	relayChunkDur   = 20 * time.Millisecond
	relayChunkBytes = 640
	// relayAnswerBytes is the echo's answer to one chunk: 20 ms at 24 kHz.
	// A relay may join answers into one frame; a header starts every one.
	relayAnswerBytes = 3 * relayChunkBytes / 2
	probeHeader      = 8
	// relayLateChunk is how far behind schedule a chunk may be sent before
	// it counts as sent late: half a chunk.
	relayLateChunk = relayChunkDur / 2
	// relayGrace is how long a session waits after the run for the answers
	// still on their way before it closes.
	relayGrace = 2 * time.Second
	// maxRelayDuration keeps every stamp within uint32 microseconds.
	maxRelayDuration = time.Hour
)

// relayPlan is what every session of a relay run shares; read-only.
type relayPlan struct {
	epoch    time.Time // stamps count µs from here, 10 s before the run: no stamp is 0
	from, to time.Time // the measurement window: chunks sent in it count
	late     time.Duration
	pcm      []byte // the chunk template; the header is overwritten per chunk
	// calls are a call's chunks (20 ms of μ-law), one per tone of
	// callTones; nil for browser sessions.
	calls [][]byte
}

func newRelayPlan(start time.Time, cfg Config) *relayPlan {
	from, to := start.Add(cfg.Ramp+settle), start.Add(cfg.Duration)
	if !from.Before(to) {
		from = start // a short run: every chunk counts
	}
	p := &relayPlan{epoch: start.Add(-10 * time.Second), from: from, to: to, late: cfg.Late,
		pcm: speechPCM(1)[:relayChunkBytes]}
	if cfg.Client == clientTwilio {
		p.calls = callChunks()
	}
	return p
}

// chunkBytes is the size of one chunk sent.
func (p *relayPlan) chunkBytes() int {
	if p.calls != nil {
		return audio.MulawFrame
	}
	return relayChunkBytes
}

func (p *relayPlan) us(t time.Time) uint32 { return uint32(t.Sub(p.epoch).Microseconds()) }

// relayProbe is one session's chunks and their answers. The sender owns
// sentAt, the reader rtt, unmatched and dup; the result is read once both
// have stopped.
type relayProbe struct {
	plan      *relayPlan
	sentAt    []uint32 // send stamp of chunk seq-1
	sent      atomic.Uint32
	rtt       []uint32 // round trip of chunk seq-1 in µs, plus 1; 0: unanswered
	answered  atomic.Uint32
	unmatched int    // answers naming a chunk never sent
	dup       int    // second answers to a chunk
	block     []byte // a call's answer audio not yet a whole chunk's
	lastSeq   uint32 // the chunk a call's last answer answered
}

// relayResult is one session's figures over the window.
type relayResult struct {
	sent, lost, late, unmatched, dup int
	rtts                             []time.Duration
}

// streamRelay sends chunks at real-time pace until ctx ends (true) or the
// session breaks (false). A chunk behind schedule goes at once: the pace
// catches up, as a browser's audio worklet would.
func (s *voiceSession) streamRelay(ctx context.Context) bool {
	p := s.probe
	chunk := append([]byte(nil), p.plan.pcm...)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	start := time.Now()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * relayChunkDur)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return true
			case <-s.readDone:
				return false
			case <-s.fallback:
				return false
			case <-timer.C:
			}
		}
		if ctx.Err() != nil {
			return true
		}
		now := time.Now()
		seq, ts := uint32(i+1), p.plan.us(now)
		if p.plan.calls != nil {
			chunk = p.plan.calls[int(seq-1)%len(callTones)] // read only: its tone names it
		} else {
			binary.LittleEndian.PutUint32(chunk[0:], seq)
			binary.LittleEndian.PutUint32(chunk[4:], ts)
		}
		// Recorded before the write: the answer may arrive before it returns.
		p.sentAt = append(p.sentAt, ts)
		p.sent.Store(seq)
		lag := now.Sub(due)
		s.mu.Lock()
		s.res.framesSent++
		s.res.bytesOut += int64(len(chunk))
		s.res.maxLag = max(s.res.maxLag, lag)
		if lag > relayLateChunk {
			s.res.framesLate++
		}
		s.mu.Unlock()
		if err := s.sendChunk(chunk); err != nil {
			if !s.closing.Load() && ctx.Err() == nil {
				s.fail("write")
			}
			return false
		}
	}
}

// onAnswer records the round trips of the answers in one binary frame.
func (p *relayProbe) onAnswer(data []byte, now time.Time) {
	for off := 0; off+probeHeader <= len(data); off += relayAnswerBytes {
		seq := binary.LittleEndian.Uint32(data[off:])
		ts := binary.LittleEndian.Uint32(data[off+4:])
		switch {
		case seq == 0 && ts == 0:
			continue // no header here (the rest of an answer)
		case seq > p.sent.Load():
			p.unmatched++
			continue
		}
		for len(p.rtt) < int(seq) {
			p.rtt = append(p.rtt, make([]uint32, 1024)...)
		}
		if p.rtt[seq-1] != 0 {
			p.dup++
			continue
		}
		p.rtt[seq-1] = p.plan.us(now) - ts + 1
		p.answered.Add(1)
	}
}

// awaitAnswers waits, up to relayGrace, until every chunk sent has been
// answered or the reader has stopped.
func (p *relayProbe) awaitAnswers(readDone <-chan struct{}) {
	deadline := time.Now().Add(relayGrace)
	for p.answered.Load() < p.sent.Load() && time.Now().Before(deadline) {
		select {
		case <-readDone:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// result counts the chunks sent in the window; answers may come later.
func (p *relayProbe) result() relayResult {
	from, to := p.plan.us(p.plan.from), p.plan.us(p.plan.to)
	r := relayResult{unmatched: p.unmatched, dup: p.dup}
	for i, ts := range p.sentAt {
		if ts < from || ts >= to {
			continue
		}
		r.sent++
		if i >= len(p.rtt) || p.rtt[i] == 0 {
			r.lost++
			continue
		}
		d := p.rtt[i] - 1
		if p.plan.calls != nil { // an arrival stamp
			d -= ts
		}
		rtt := time.Duration(d) * time.Microsecond
		r.rtts = append(r.rtts, rtt)
		if rtt > p.plan.late {
			r.late++
		}
	}
	return r
}

// RelayFigures are the relay load's round trips over the measurement
// window, summed over sessions.
type RelayFigures struct {
	ChunkBytes int     `json:"chunkBytes"`
	IntervalMs float64 `json:"intervalMs"`
	WindowS    float64 `json:"windowS"`
	LateMs     float64 `json:"lateMs"`
	Sent       int     `json:"sent"`     // chunks sent in the window
	Answered   int     `json:"answered"` // of those, answered before the session closed
	Lost       int     `json:"lost"`
	Late       int     `json:"late"`      // answered after LateMs
	Unmatched  int     `json:"unmatched"` // answers naming no chunk sent
	Dup        int     `json:"dup"`
	RTT        RTT     `json:"rttMs"`
}

// RTT summarises round trips, in milliseconds.
type RTT struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func relayFigures(plan *relayPlan, results []sessionResult) *RelayFigures {
	f := &RelayFigures{ChunkBytes: plan.chunkBytes(), IntervalMs: ms(relayChunkDur),
		WindowS: plan.to.Sub(plan.from).Seconds(), LateMs: ms(plan.late)}
	var rtts []time.Duration
	for _, res := range results {
		r := res.relay
		f.Sent += r.sent
		f.Lost += r.lost
		f.Late += r.late
		f.Unmatched += r.unmatched
		f.Dup += r.dup
		rtts = append(rtts, r.rtts...)
	}
	f.Answered = len(rtts)
	if len(rtts) == 0 {
		return f
	}
	slices.Sort(rtts)
	var sum time.Duration
	for _, d := range rtts {
		sum += d
	}
	f.RTT = RTT{P50: ms(percentile(rtts, 50)), P95: ms(percentile(rtts, 95)), P99: ms(percentile(rtts, 99)),
		Max: ms(rtts[len(rtts)-1]), Mean: ms(sum / time.Duration(len(rtts)))}
	return f
}
