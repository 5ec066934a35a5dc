package fakegemini

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// Orderings the real Live service produces and a client must cope with,
// for scripted tests. Both are seen in traces of native-audio models:
//
// (a) A call before the turn ends, the turn "complete" before the call is
// answered: model audio → toolCall → more audio → generationComplete →
// turnComplete, all before the client sends its toolResponse. The call
// stays pending across turnComplete; once answered, the model starts a new
// generation. LiveSession.CallMidTurn sends it; LiveToolTurn is a brain
// that answers every user turn so.
//
// (b) Audio faster than real time: model audio arrives in ~320 ms chunks
// about four times faster than it plays, and turnComplete is held back to
// about when the audio ends playing. LiveSession.Speak and FinishTurn send
// it.

// Defaults of Speech, after a trace of the real service.
const (
	speechChunk   = 320 * time.Millisecond
	speechSpeedup = 4
)

// Speech is model audio sent the way the real service sends it.
type Speech struct {
	// PCM is the audio: PCM16LE mono at 24 kHz.
	PCM []byte
	// Transcript, when set, is sent as outputTranscription pieces spread
	// over the audio, each just before the chunk it belongs to.
	Transcript string
	// Chunk is the audio per message; zero means 320 ms.
	Chunk time.Duration
	// Speedup is how many times faster than it plays the audio is sent:
	// one chunk every Chunk/Speedup. Zero means 4; a negative value sends
	// every chunk at once.
	Speedup float64
}

// Tone is Speech of d of the demo's sine tone, for tests that need audio
// of a known length.
func Tone(d time.Duration) Speech {
	n := int(int64(liveOutRate) * int64(d) / int64(time.Second))
	pcm := make([]byte, 0, 2*n)
	for len(pcm) < 2*n {
		pcm = append(pcm, synthMelody(answerMelody)...)
	}
	return Speech{PCM: pcm[:2*n]}
}

// Speak sends sp's audio (and transcript) paced as sp says, and returns
// when that audio ends playing at a client that plays audio as it arrives:
// speech sent while earlier speech of the turn is still playing queues
// behind it. FinishTurn waits for that moment.
func (s *LiveSession) Speak(ctx context.Context, sp Speech) (time.Time, error) {
	chunk, speedup := sp.Chunk, sp.Speedup
	if chunk <= 0 {
		chunk = speechChunk
	}
	if speedup == 0 {
		speedup = speechSpeedup
	}
	var interval time.Duration
	if speedup > 0 {
		interval = time.Duration(float64(chunk) / speedup)
	}
	chunks := chunkPCM(sp.PCM, chunk)
	transcripts := spreadText(sp.Transcript, len(chunks))

	start := time.Now()
	s.mu.Lock()
	if s.playout.Before(start) {
		s.playout = start
	}
	s.playout = s.playout.Add(pcmDuration(sp.PCM))
	end := s.playout
	s.mu.Unlock()

	for i, c := range chunks {
		if i > 0 {
			if err := fakeserve.Wait(ctx, time.Until(start.Add(time.Duration(i)*interval))); err != nil {
				return end, err
			}
		}
		if transcripts[i] != "" {
			if err := s.SendOutputTranscript(transcripts[i]); err != nil {
				return end, err
			}
		}
		if err := s.SendAudio(c); err != nil {
			return end, err
		}
	}
	return end, nil
}

// FinishTurn ends the model's turn as the real service does after speech:
// generationComplete at once, then turnComplete (with usage, nil for none)
// when the turn's audio ends playing (at once when nothing was spoken).
func (s *LiveSession) FinishTurn(ctx context.Context, usage *genai.UsageMetadata) error {
	if err := s.SendGenerationComplete(); err != nil {
		return err
	}
	s.mu.Lock()
	end := s.playout
	s.playout = time.Time{}
	s.mu.Unlock()
	if err := fakeserve.Wait(ctx, time.Until(end)); err != nil {
		return err
	}
	return s.SendTurnComplete(usage)
}

// CallMidTurn plays ordering (a): before, a toolCall of calls, after, then
// FinishTurn, without waiting for the client's answer. It returns the call
// IDs; the calls stay pending, and the client may answer them after
// turnComplete (see AwaitToolResponse).
func (s *LiveSession) CallMidTurn(ctx context.Context, before Speech, calls []Call, after Speech, usage *genai.UsageMetadata) ([]string, error) {
	if _, err := s.Speak(ctx, before); err != nil {
		return nil, err
	}
	ids, err := s.SendToolCall(calls...)
	if err != nil {
		return nil, err
	}
	if _, err := s.Speak(ctx, after); err != nil {
		return ids, err
	}
	return ids, s.FinishTurn(ctx, usage)
}

// AwaitToolResponse waits for the client's next toolResponse and returns
// it; other client messages that arrive meanwhile are discarded. It fails
// with ErrLiveClosed when the connection ends first, or with ctx's error.
func (s *LiveSession) AwaitToolResponse(ctx context.Context) (ClientEvent, error) {
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return ClientEvent{}, ErrLiveClosed
			}
			if ev.Kind == EventToolResponse {
				return ev, nil
			}
		case <-ctx.Done():
			return ClientEvent{}, ctx.Err()
		}
	}
}

// pcmDuration is how long 24 kHz PCM16 audio plays.
func pcmDuration(pcm []byte) time.Duration {
	return time.Duration(len(pcm)/2) * time.Second / liveOutRate
}

// LiveToolTurn is a scripted Live brain that answers every user turn with
// ordering (a): it speaks Before, calls Call, speaks After, finishes the
// turn (generationComplete, then turnComplete at the playout end) without
// waiting for the answer, then waits for the toolResponse and answers in a
// second turn: Answer, then FinishTurn. A user turn ends with a
// clientContent that has turnComplete, a realtimeInput text, an
// audioStreamEnd or an activityEnd. Its sessions do not record frames.
type LiveToolTurn struct {
	Call                  Call
	Before, After, Answer Speech
}

// ServeLive runs the script on one connection until it ends.
func (b *LiveToolTurn) ServeLive(ctx context.Context, s *LiveSession) error {
	for {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				return nil
			}
			switch {
			case ev.Kind == EventClientContent && ev.TurnComplete, ev.Kind == EventText,
				ev.Kind == EventAudioStreamEnd, ev.Kind == EventActivityEnd:
			default:
				continue
			}
			if _, err := s.CallMidTurn(ctx, b.Before, []Call{b.Call}, b.After, nil); err != nil {
				return ignoreClosed(err)
			}
			if _, err := s.AwaitToolResponse(ctx); err != nil {
				return ignoreClosed(err)
			}
			if _, err := s.Speak(ctx, b.Answer); err != nil {
				return ignoreClosed(err)
			}
			if err := s.FinishTurn(ctx, nil); err != nil {
				return ignoreClosed(err)
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// ignoreClosed treats the end of the connection as a normal end for a
// brain.
func ignoreClosed(err error) error {
	if errors.Is(err, ErrLiveClosed) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
