package geminilive

import (
	"encoding/base64"
	"reflect"
	"testing"

	"github.com/turnstile-gw/turnstile/transport"
)

var (
	pcmA = []byte{0x01, 0x00, 0xff, 0x7f, 0x00, 0x80, 0x10, 0x20}
	pcmB = []byte{0x02, 0x03, 0x04}
	b64A = base64.StdEncoding.EncodeToString(pcmA)
	b64B = base64.StdEncoding.EncodeToString(pcmB)
)

// Messages of model audio, as the real service, the fake and relaybench's
// fake send them: the fast path must take every one.
var audioMessages = []string{
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` + b64A + `"}}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"` + b64A + `","mimeType":"audio/pcm;rate=24000"}}],"role":"model"}}}`,
	`{"serverContent":{"modelTurn":{"role":"model","parts":[{"inlineData":{"mimeType":"audio/pcm","data":"` + b64A + `"}},{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` + b64B + `"}}]}}}`,
	" {\n \"serverContent\" : {\"turnComplete\":true, \"modelTurn\" : { \"parts\" : [ { \"inlineData\" : {\"mimeType\":\"audio/pcm;rate=24000\" ,\"data\":\"" + b64A + "\"} } ] } , \"generationComplete\":true,\"interrupted\":false } }\r\n",
	`{"serverContent":{"interrupted":true}}`,
	`{"serverContent":{"turnComplete":true,"modelTurn":{"parts":[]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":""}}]}}}`,
	`{"serverContent":{}}`,
}

// Messages the fast path must leave to the full decoding: other fields,
// other spellings, anything it cannot take without allocating, anything
// malformed.
var otherMessages = []string{
	`{}`,
	`{"setupComplete":{}}`,
	`{"serverContent":{"outputTranscription":{"text":"hi"}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"text":"Hello!"}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"text":"**Plan**","thought":true}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm;rate=24000","data":"` + b64A + `"},"thought":true}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"image/png","data":"` + b64A + `"}}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"data":"` + b64A + `"}}]}}}`,
	`{"serverContent":{"turnComplete":true},"usageMetadata":{"totalTokenCount":5}}`,
	`{"ServerContent":{"turnComplete":true}}`,
	`{"serverContent":{"TurnComplete":true}}`,
	`{"serverContent":{"turnComplete":true,"turnComplete":false}}`,
	`{"serverContent":{"turnComplete":true},"serverContent":{"interrupted":true}}`,
	`{"serverContent":{"modelTurn":{"role":"model","role":"user","parts":[]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm","mimeType":"audio/pcm","data":"AA=="}}]}}}`,
	`{"serverContent":{"modelTurn":{"role":"mo\u0064el","parts":[]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm","data":"AA\/A"}}]}}}`,
	"{\"serverContent\":{\"modelTurn\":{\"role\":\"mo\tdel\",\"parts\":[]}}}",
	`{"serverContent":{"modelTurn":{"role":null,"parts":[]}}}`,
	`{"serverContent":{"modelTurn":null}}`,
	`{"serverContent":{"turnComplete":1}}`,
	`{"serverContent":{"turnComplete":truex}}`,
	`{"serverContent":{"turnComplete":true,}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm","data":"AA=="}},]}}}`,
	`{"serverContent":{"turnComplete":true}} x`,
	`{"serverContent":{"turnComplete":true}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm","data":"!!"}}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm","data":"AA"}}]}}}`,
	`{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"audio/pcm","data":"AA\"=="}}]}}}`,
	"{\"serverContent\":{\"modelTurn\":{\"parts\":[{\"inlineData\":{\"mimeType\":\"audio/pcm\",\"data\":\"AA\nAA==\"}}]}}}",
	"{\"serverContent\":{\"modelTurn\":{\"parts\":[{\"inlineData\":{\"mimeType\":\"audio/pcm\",\"data\":\"AA\rAA==\"}}]}}}",
	"{\"serverContent\":{\"modelTurn\":{\"parts\":[{\"inlineData\":{\"mimeType\":\"audio/pcm\",\"data\":\"AA\x01A==\"}}]}}}",
	`{"serverContent":{"modelTurn":{"parts":[` + parts(maxAudioParts+1) + `]}}}`,
	`{"goAway":{"timeLeft":"50s"}}`,
	`{"error":{"code":429}}`,
	`not json`,
	``,
}

func parts(n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ","
		}
		s += `{"inlineData":{"mimeType":"audio/pcm","data":"` + b64B + `"}}`
	}
	return s
}

// slowEvents is what the full decoding makes of msg, or ok false when it
// refuses the message.
func slowEvents(msg string) ([]transport.LiveEvent, bool) {
	m, err := decodeMessage([]byte(msg))
	if err != nil {
		return nil, false
	}
	return appendEvents(nil, &m.LiveServerMessage), true
}

// fastEvents is what the fast path makes of msg, or ok false when it
// leaves it to the full decoding.
func fastEvents(s *Session, msg string) ([]transport.LiveEvent, bool) {
	s.events = s.events[:0]
	if !s.scanAudio([]byte(msg)) {
		if len(s.events) != 0 {
			panic("scanAudio declined a message but left events behind")
		}
		return nil, false
	}
	return s.events, true
}

// normal makes empty and nil audio alike for comparison.
func normal(evs []transport.LiveEvent) []transport.LiveEvent {
	out := make([]transport.LiveEvent, 0, len(evs))
	for _, ev := range evs {
		if len(ev.Audio) == 0 {
			ev.Audio = nil
		}
		out = append(out, ev)
	}
	return out
}

func TestFastPathTakesModelAudioAndAgreesWithTheFullDecoding(t *testing.T) {
	s := &Session{}
	for _, msg := range audioMessages {
		fast, ok := fastEvents(s, msg)
		if !ok {
			t.Errorf("the fast path declined %s", msg)
			continue
		}
		slow, ok := slowEvents(msg)
		if !ok {
			t.Fatalf("the full decoding refuses %s", msg)
		}
		if !reflect.DeepEqual(normal(fast), normal(slow)) {
			t.Errorf("%s:\nfast %+v\nfull %+v", msg, fast, slow)
		}
	}
	fast, _ := fastEvents(s, audioMessages[2])
	if len(fast) != 2 || string(fast[0].Audio) != string(pcmA) || string(fast[1].Audio) != string(pcmB) {
		t.Errorf("two parts gave %+v, want their audio in order", fast)
	}
}

func TestFastPathLeavesEverythingElseToTheFullDecoding(t *testing.T) {
	s := &Session{}
	for _, msg := range otherMessages {
		if evs, ok := fastEvents(s, msg); ok {
			t.Errorf("the fast path took %q (%+v)", msg, evs)
		}
	}
}

func TestFastPathAllocatesNothing(t *testing.T) {
	s := &Session{}
	msg := []byte(audioMessages[3])
	allocs := testing.AllocsPerRun(100, func() {
		s.events = s.events[:0]
		if !s.scanAudio(msg) {
			t.Fatal("declined")
		}
	})
	if allocs != 0 {
		t.Errorf("scanAudio allocates %v times per message, want 0", allocs)
	}
}

// The fast path is an optimisation only: whenever it takes a message, the
// full decoding must take it too and make the same events of it.
func FuzzFastPathAgreesWithTheFullDecoding(f *testing.F) {
	for _, msg := range audioMessages {
		f.Add(msg)
	}
	for _, msg := range otherMessages {
		f.Add(msg)
	}
	s := &Session{}
	f.Fuzz(func(t *testing.T, msg string) {
		fast, ok := fastEvents(s, msg)
		if !ok {
			return
		}
		slow, ok := slowEvents(msg)
		if !ok {
			t.Fatalf("the fast path took %q, which the full decoding refuses", msg)
		}
		if !reflect.DeepEqual(normal(fast), normal(slow)) {
			t.Fatalf("%q:\nfast %+v\nfull %+v", msg, fast, slow)
		}
	})
}
