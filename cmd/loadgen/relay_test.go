package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/audio"
)

func TestEchoAnswersAudioWithItsHeaderAndOneAndAHalfTimesItsLength(t *testing.T) {
	pcm := make([]byte, relayChunkBytes)
	for i := range pcm {
		pcm[i] = byte(i*5 + 1)
	}
	msg := `{"realtimeInput":{"audio":{"data":"` + base64.StdEncoding.EncodeToString(pcm) + `","mimeType":"audio/pcm;rate=16000"}}}`
	var e echoer
	out, ok := e.answer([]byte(msg))
	if !ok {
		t.Fatal("no answer to realtimeInput audio")
	}
	var got struct {
		ServerContent struct {
			ModelTurn struct {
				Parts []struct {
					InlineData struct {
						MIMEType string `json:"mimeType"`
						Data     []byte `json:"data"`
					} `json:"inlineData"`
				} `json:"parts"`
			} `json:"modelTurn"`
		} `json:"serverContent"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
	parts := got.ServerContent.ModelTurn.Parts
	if len(parts) != 1 || parts[0].InlineData.MIMEType != "audio/pcm;rate=24000" {
		t.Fatalf("answer %s, want one part of 24 kHz audio", out)
	}
	data := parts[0].InlineData.Data
	if len(data) != relayAnswerBytes || string(data[:probeHeader]) != string(pcm[:probeHeader]) {
		t.Errorf("answer audio %d bytes starting %x, want %d starting %x", len(data), data[:8], relayAnswerBytes, pcm[:8])
	}
	for _, other := range []string{`{"setup":{"model":"models/x"}}`, `{"realtimeInput":{"audioStreamEnd":true}}`,
		`{"clientContent":{"turns":[{"parts":[{"text":"hi"}],"role":"user"}],"turnComplete":true}}`} {
		if _, ok := e.answer([]byte(other)); ok {
			t.Errorf("answered %s", other)
		}
	}
}

func TestRelayProbeCountsChunksSentInTheWindow(t *testing.T) {
	start := time.Unix(1000, 0)
	plan := &relayPlan{epoch: start.Add(-10 * time.Second), from: start.Add(time.Second), to: start.Add(2 * time.Second),
		late: 200 * time.Millisecond}
	p := &relayProbe{plan: plan}
	// Chunks 1-4: before the window, in it (answered in 50 ms), in it
	// (answered in 300 ms: late), in it (never answered); 5 after it.
	sends := []time.Duration{500 * time.Millisecond, 1100 * time.Millisecond, 1200 * time.Millisecond,
		1300 * time.Millisecond, 2100 * time.Millisecond}
	for _, d := range sends {
		p.sentAt = append(p.sentAt, plan.us(start.Add(d)))
	}
	p.sent.Store(uint32(len(sends)))
	answer := func(seq uint32) []byte {
		b := make([]byte, relayAnswerBytes)
		binary.LittleEndian.PutUint32(b[0:], seq)
		binary.LittleEndian.PutUint32(b[4:], p.sentAt[seq-1])
		return b
	}
	// Chunks 1 and 2 answered in one coalesced frame, 3 late, 2 again,
	// and an answer to a chunk never sent.
	p.onAnswer(append(answer(1), answer(2)...), start.Add(1150*time.Millisecond))
	p.onAnswer(answer(3), start.Add(1500*time.Millisecond))
	p.onAnswer(answer(2), start.Add(1600*time.Millisecond))
	stray := make([]byte, relayAnswerBytes)
	binary.LittleEndian.PutUint32(stray, 99)
	binary.LittleEndian.PutUint32(stray[4:], 1)
	p.onAnswer(stray, start.Add(1700*time.Millisecond))

	r := p.result()
	if r.sent != 3 || r.lost != 1 || r.late != 1 || r.dup != 1 || r.unmatched != 1 || len(r.rtts) != 2 {
		t.Fatalf("result %+v: want 3 sent in the window, 1 lost, 1 late, 1 dup, 1 unmatched, 2 round trips", r)
	}
	if r.rtts[0] != 50*time.Millisecond || r.rtts[1] != 300*time.Millisecond {
		t.Errorf("round trips %v, want [50ms 300ms]", r.rtts)
	}
	if got := p.answered.Load(); got != 3 {
		t.Errorf("answered %d chunks, want 3 (1, 2, 3)", got)
	}
}

// A call's answers carry no header: the k-th 160 μ-law bytes answer the
// k-th chunk, however the gateway splits them into media frames.
func TestRelayProbeMatchesACallsAnswersInOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	plan := &relayPlan{epoch: start.Add(-10 * time.Second), from: start, to: start.Add(2 * time.Second),
		late: 200 * time.Millisecond, mulaw: make([]byte, audio.MulawFrame)}
	p := &relayProbe{plan: plan}
	for _, d := range []time.Duration{100 * time.Millisecond, 120 * time.Millisecond, 140 * time.Millisecond} {
		p.sentAt = append(p.sentAt, plan.us(start.Add(d)))
	}
	p.sent.Store(3)
	// Chunk 1's answer in two frames (100 + 60 bytes), chunk 2's with the
	// first half of 3's, the rest of 3 late; then 160 bytes no chunk asked for.
	p.onMulaw(100, start.Add(105*time.Millisecond))
	p.onMulaw(60, start.Add(110*time.Millisecond))
	p.onMulaw(240, start.Add(130*time.Millisecond))
	p.onMulaw(80, start.Add(500*time.Millisecond))
	p.onMulaw(160, start.Add(510*time.Millisecond))
	r := p.result()
	want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 360 * time.Millisecond}
	if r.sent != 3 || r.lost != 0 || r.late != 1 || r.unmatched != 1 || !slices.Equal(r.rtts, want) {
		t.Fatalf("result %+v: want 3 sent, none lost, 1 late, 1 unmatched, round trips %v", r, want)
	}
}
