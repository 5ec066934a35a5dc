package geminilive_test

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"sync"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
)

// audioChunk is 10 ms of 16 kHz PCM stamped with its sender and sequence
// number, the rest a pattern the fake can check byte for byte.
func audioChunk(sender, seq int) []byte {
	b := make([]byte, 320)
	binary.LittleEndian.PutUint16(b[0:], uint16(sender))
	binary.LittleEndian.PutUint16(b[2:], uint16(seq))
	for i := 4; i < len(b); i++ {
		b[i] = byte(sender*31 + seq*7 + i)
	}
	return b
}

func TestConcurrentAudioReachesTheUpstreamUnchangedAndInOrder(t *testing.T) {
	const senders, chunks = 4, 60
	f := startFake(t)
	s := connect(t, newModel(t, f.addr, geminilive.Options{}), transport.LiveConfig{})
	fs := f.session(t)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }() // also when the test fails early
	for g := range senders {
		wg.Go(func() {
			for i := range chunks {
				select {
				case <-stop:
					return
				default:
				}
				chunk := audioChunk(g, i)
				if err := s.SendAudio(chunk); err != nil {
					t.Errorf("sender %d chunk %d: %v", g, i, err)
					return
				}
				clear(chunk) // the adapter must not keep it
			}
		})
	}

	next := make([]int, senders)
	for n := 0; n < senders*chunks; n++ {
		ev := clientEvent(t, fs)
		if ev.Kind != fakegemini.EventAudio || ev.MIMEType != "audio/pcm;rate=16000" {
			t.Fatalf("message %d = %s %q, want audio with audio/pcm;rate=16000", n, ev.Kind, ev.MIMEType)
		}
		if len(ev.Data) < 4 {
			t.Fatalf("message %d: %d bytes of audio", n, len(ev.Data))
		}
		g := int(binary.LittleEndian.Uint16(ev.Data[0:]))
		seq := int(binary.LittleEndian.Uint16(ev.Data[2:]))
		if g >= senders || seq != next[g] {
			t.Fatalf("message %d is sender %d chunk %d, want that sender's chunk %d next", n, g, seq, next[g])
		}
		if !bytes.Equal(ev.Data, audioChunk(g, seq)) {
			t.Fatalf("sender %d chunk %d arrived altered", g, seq)
		}
		next[g]++
	}
	wg.Wait()

	must(t, s.SendAudioEnd())
	if ev := clientEvent(t, fs); ev.Kind != fakegemini.EventAudioStreamEnd {
		t.Errorf("after the audio got %s, want audioStreamEnd", ev.Kind)
	}
}

func TestTextContextAndToolResponsesReachTheUpstream(t *testing.T) {
	f := startFake(t)
	s := connect(t, newModel(t, f.addr, geminilive.Options{}), transport.LiveConfig{})
	fs := f.session(t)

	must(t, s.SendText("where is my order?"))
	if ev := clientEvent(t, fs); ev.Kind != fakegemini.EventClientContent || !ev.TurnComplete ||
		ev.UserText() != "where is my order?" || len(ev.Turns) != 1 || ev.Turns[0].Role != "user" {
		t.Errorf("SendText arrived as %+v, want one complete user turn", ev)
	}

	must(t, s.SendContext("The user confirmed the refund."))
	if ev := clientEvent(t, fs); ev.Kind != fakegemini.EventClientContent || ev.TurnComplete ||
		ev.UserText() != "The user confirmed the refund." {
		t.Errorf("SendContext arrived as %+v, want a user note without turnComplete", ev)
	}

	results := []transport.FunctionResult{
		{ID: "fc-1", Name: "kb_search", Response: map[string]any{"output": map[string]any{"hits": []any{"refunds"}}}},
		{ID: "fc-2", Name: "kb_get", Response: map[string]any{"error": "not found"}},
	}
	must(t, s.SendToolResponses(results))
	ev := clientEvent(t, fs)
	if ev.Kind != fakegemini.EventToolResponse || len(ev.FunctionResponses) != len(results) {
		t.Fatalf("SendToolResponses arrived as %+v, want one toolResponse with 2 responses", ev)
	}
	for i, r := range results {
		fr := ev.FunctionResponses[i]
		if fr.ID != r.ID || fr.Name != r.Name || !reflect.DeepEqual(fr.Response, r.Response) {
			t.Errorf("response %d = %+v, want %+v", i, *fr, r)
		}
	}
}
