package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
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

// A call's chunks come back through the gateway's real conversions (μ-law
// → 16 kHz, the echo's 24 kHz, → μ-law) and are named by their tones:
// every answer is paired with its own chunk, whatever the gateway dropped
// in between (fewer than len(callTones) in a row), and a block of silence
// is no answer.
func TestCallAnswersAreNamedByTheirTonesThroughTheGatewaysConversions(t *testing.T) {
	start := time.Unix(1000, 0)
	plan := &relayPlan{epoch: start.Add(-10 * time.Second), from: start, to: start.Add(10 * time.Second),
		late: 200 * time.Millisecond, calls: callChunks()}
	p := &relayProbe{plan: plan}
	in, out := audio.NewInbound(), audio.NewOutbound()
	dropped := map[int]bool{5: true, 20: true, 21: true, 22: true, 23: true, 24: true, 25: true, 26: true}
	const chunks = 60
	for i := range chunks {
		sent := start.Add(time.Duration(i) * relayChunkDur)
		p.sentAt = append(p.sentAt, plan.us(sent))
		p.sent.Store(uint32(i + 1))
		pcm16 := in.Convert(nil, plan.calls[i%len(callTones)])
		if dropped[i] {
			continue
		}
		pcm24 := make([]byte, 3*len(pcm16)/2)
		upsample(pcm24, pcm16)
		// Answers arrive in media frames of any size: here 100 bytes.
		mulaw := out.Convert(nil, pcm24)
		for len(mulaw) > 0 {
			n := min(100, len(mulaw))
			p.onMulaw(mulaw[:n], sent.Add(7*time.Millisecond))
			mulaw = mulaw[n:]
		}
	}
	p.onMulaw(make([]byte, audio.MulawFrame), start.Add(5*time.Second)) // μ-law zeros: loud noise, no tone
	r := p.result()
	if r.sent != chunks || r.lost != len(dropped) || r.unmatched > 1 || len(r.rtts) != chunks-len(dropped) {
		t.Fatalf("result: %d sent, %d lost, %d unmatched, %d round trips; want %d sent, %d lost, at most 1 unmatched",
			r.sent, r.lost, r.unmatched, len(r.rtts), chunks, len(dropped))
	}
	for i, d := range r.rtts {
		if d < 7*time.Millisecond || d > 7*time.Millisecond+relayChunkDur {
			t.Fatalf("round trip %d = %v: an answer was paired with another chunk", i, d)
		}
	}
}
