package main

import (
	"strings"
	"testing"
	"time"
)

// Stacks as `go tool pprof -traces` prints them, one per part.
const goTraces = `File: gateway
Type: cpu
Duration: 10s, Total samples = 1.11s (11.10%)
-----------+-------------------------------------------------------
     100ms   runtime.futex
             runtime.futexwakeup
             runtime.notewakeup
             runtime.startm
             runtime.wakep
             runtime.ready
             runtime.goready
             runtime.chansend
             github.com/turnstile-gw/turnstile/session.(*queue).startOrWake
-----------+-------------------------------------------------------
     200ms   internal/runtime/syscall.Syscall6
             syscall.Syscall
             syscall.write
             internal/poll.(*FD).Write
             net.(*conn).Write
-----------+-------------------------------------------------------
      15ms   github.com/turnstile-gw/turnstile/internal/evloop.(*Conn).onReadable
             github.com/turnstile-gw/turnstile/internal/evloop.(*Loop).run
-----------+-------------------------------------------------------
      50ms   encoding/base64.(*Encoding).Encode
             encoding/base64.(*Encoding).AppendEncode (inline)
             github.com/turnstile-gw/turnstile/transport/geminilive.(*Session).SendAudio
-----------+-------------------------------------------------------
      20ms   github.com/segmentio/asm/base64.decodeAVX2
             github.com/segmentio/asm/base64.(*Encoding).Decode
             github.com/turnstile-gw/turnstile/internal/audiob64.Decode (inline)
             github.com/turnstile-gw/turnstile/transport/geminilive.(*scanner).part
-----------+-------------------------------------------------------
      10ms   github.com/segmentio/asm/base64.encodeAVX2
             github.com/segmentio/asm/base64.(*Encoding).Encode
             github.com/turnstile-gw/turnstile/internal/audiob64.AppendEncode
             github.com/turnstile-gw/turnstile/transport/geminilive.(*Session).SendAudio
-----------+-------------------------------------------------------
      40ms   github.com/coder/websocket.maskGo
             github.com/coder/websocket.mask (inline)
             github.com/coder/websocket.(*msgWriter).Write
-----------+-------------------------------------------------------
      30ms   runtime.memmove
             bufio.(*Writer).Write
             github.com/coder/websocket.(*Conn).writeFrame
-----------+-------------------------------------------------------
      10ms   github.com/gobwas/ws.cipherBlocksAVX2
             github.com/gobwas/ws.cipherBlocks
             github.com/gobwas/ws.Cipher
             github.com/turnstile-gw/turnstile/internal/wsbuf.(*Client).writeFrame
-----------+-------------------------------------------------------
      15ms   github.com/gobwas/ws.ReadHeaderBuffer
             github.com/turnstile-gw/turnstile/internal/wsbuf.(*Client).header
-----------+-------------------------------------------------------
      20ms   github.com/turnstile-gw/turnstile/transport/geminilive.scanString
             github.com/turnstile-gw/turnstile/transport/geminilive.(*Session).scanAudio
-----------+-------------------------------------------------------
      60ms   github.com/turnstile-gw/turnstile/session/voice.(*Session).onEvent
             github.com/turnstile-gw/turnstile/session/voice.(*Session).pump
-----------+-------------------------------------------------------
      10ms   main.parseHeader
             main.(*loop).readable
             main.(*loop).run
-----------+-------------------------------------------------------
      70ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker.func2
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      30ms   runtime.lock2
             runtime.lockWithRank (inline)
             runtime.chansend
             github.com/turnstile-gw/turnstile/session.(*queue).startOrWake
-----------+-------------------------------------------------------
     500ms   runtime.findRunnable
             runtime.schedule
             runtime.park_m
             runtime.mcall
-----------+-------------------------------------------------------
`

func TestGoProfileSplitsEverySampleIntoItsPart(t *testing.T) {
	s, err := parseTraces(strings.NewReader(goTraces))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{
		partSched:   600 * time.Millisecond,
		partSyscall: 200 * time.Millisecond,
		partBase64:  80 * time.Millisecond,
		partMasking: 50 * time.Millisecond,
		partFraming: 45 * time.Millisecond,
		partJSON:    20 * time.Millisecond,
		partOwn:     70 * time.Millisecond, // session/voice's, and a command's own (main.)
		partLoop:    15 * time.Millisecond,
		partGC:      70 * time.Millisecond,
		partSync:    30 * time.Millisecond,
	}
	for p, d := range want {
		if s.parts[p] != d {
			t.Errorf("%s = %v, want %v (all: %v)", p, s.parts[p], d, s.parts)
		}
	}
	if len(s.parts) != len(want) {
		t.Errorf("parts %v, want only %v", s.parts, want)
	}
	if s.total != 1180*time.Millisecond || s.duration != 10*time.Second {
		t.Errorf("total %v over %v, want 1.18s over 10s", s.total, s.duration)
	}
	if got := perSessionSecond(s.parts[partSyscall], 200, s.duration); got != 0.1 {
		t.Errorf("syscalls %.3f ms per session-second, want 0.1 (200 ms / 200 sessions / 10 s)", got)
	}
}

// A .cpuprofile: root → (program), (idle), (garbage collector), and a JS
// path relay.js → ws's sender (framing, with a native writev under it and
// the mask) and the SDK's JSON.parse and base64 decode.
const v8Sample = `{
 "nodes": [
  {"id": 1, "callFrame": {"functionName": "(root)", "url": ""}, "children": [2, 3, 4, 5]},
  {"id": 2, "callFrame": {"functionName": "(program)", "url": ""}},
  {"id": 3, "callFrame": {"functionName": "(idle)", "url": ""}},
  {"id": 4, "callFrame": {"functionName": "(garbage collector)", "url": ""}},
  {"id": 5, "callFrame": {"functionName": "", "url": "file:///p/relay.js"}, "children": [6, 9, 11]},
  {"id": 6, "callFrame": {"functionName": "sendFrame", "url": "file:///p/node_modules/ws/lib/sender.js"}, "children": [7, 8]},
  {"id": 7, "callFrame": {"functionName": "writev", "url": ""}},
  {"id": 8, "callFrame": {"functionName": "_mask", "url": "file:///p/node_modules/ws/lib/buffer-util.js"}},
  {"id": 9, "callFrame": {"functionName": "onmessage", "url": "file:///p/node_modules/@google/genai/dist/node/index.cjs"}, "children": [10, 12]},
  {"id": 10, "callFrame": {"functionName": "parse", "url": ""}},
  {"id": 11, "callFrame": {"functionName": "emit", "url": "node:events"}},
  {"id": 12, "callFrame": {"functionName": "base64Write", "url": ""}}
 ],
 "startTime": 0, "endTime": 12000,
 "samples":    [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2],
 "timeDeltas": [0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]
}`

func TestV8ProfileSplitsIntoTheSamePartsWithoutIdle(t *testing.T) {
	s, err := splitV8(strings.NewReader(v8Sample))
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := map[string]time.Duration{
		partSched: 2 * ms, partGC: ms, partOwn: ms, partFraming: ms, partSyscall: ms, partMasking: ms,
		partSDK: ms, partJSON: ms, partNodeCore: ms, partBase64: ms,
	}
	for p, d := range want {
		if s.parts[p] != d {
			t.Errorf("%s = %v, want %v (all: %v)", p, s.parts[p], d, s.parts)
		}
	}
	if s.total != 11*ms {
		t.Errorf("total %v, want 11ms (the idle sample left out)", s.total)
	}
}
