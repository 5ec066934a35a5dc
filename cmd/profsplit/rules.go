package main

import "strings"

// The parts, named alike for both runtimes.
const (
	partGC       = "GC and allocation"
	partSched    = "runtime scheduling (park, wake, find work, poll, syscall entry/exit)"
	partSyscall  = "syscalls (socket read/write, in the kernel)"
	partSync     = "channels, locks, timers"
	partFraming  = "WebSocket framing"
	partMasking  = "WebSocket masking"
	partBase64   = "base64"
	partJSON     = "JSON scanning and encoding"
	partLoop     = "event loop (readiness, kept writes, fast-path hand-off)"
	partOwn      = "relay's own code"
	partSDK      = "Live SDK's own code"
	partRuntime  = "runtime, other"
	partNetStd   = "net, HTTP, other library code"
	partNodeCore = "Node core JS (streams, events, buffers, timers)"
)

const ownModule = "github.com/turnstile-gw/turnstile/"

// Go: frames anywhere in a stack that say what the sample was doing, in
// order of precedence.
var goStackRules = []struct {
	part     string
	prefixes []string
}{
	{partGC, []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge",
		"runtime.mallocgc", "runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination", "runtime.markroot",
		"runtime.sweepone", "runtime.(*mheap)", "runtime.growslice", "runtime.newobject"}},
	{partSched, []string{"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.mcall",
		"runtime.goready", "runtime.ready", "runtime.wakep", "runtime.startm", "runtime.stopm", "runtime.notewakeup",
		"runtime.notesleep", "runtime.futex", "runtime.netpoll", "runtime.entersyscall", "runtime.exitsyscall",
		"runtime.reentersyscall", "runtime.sysmon", "runtime.mstart", "runtime.handoffp", "runtime.gopark",
		"runtime.goexit0", "runtime.newproc", "runtime.gosched", "runtime.semrelease", "runtime.semacquire",
		"runtime.checkTimers", "runtime.morestack", "runtime.newstack", "runtime.usleep", "runtime.osyield"}},
	{partSyscall, []string{"syscall.Syscall", "syscall.RawSyscall", "syscall.syscall", "syscall.rawSyscall",
		"internal/runtime/syscall.Syscall", "runtime/internal/syscall.Syscall"}},
}

// Go: the leaf's owner, looked up past shared helpers.
var goHelpers = []string{"runtime.mem", "runtime.cmpbody", "runtime.indexbytebody", "bytes.", "io.", "bufio.",
	"internal/bytealg.", "unicode/utf8.", "slices.", "strconv."}

var goSyncLeaves = []string{"runtime.chan", "runtime.selectgo", "runtime.selectnb", "runtime.lock", "runtime.unlock",
	"runtime.(*timer)", "runtime.(*timers)", "runtime.resettimer", "runtime.modtimer", "runtime.deltimer",
	"runtime.(*hchan)", "runtime.send", "runtime.recv", "runtime.closechan", "sync.", "sync/atomic.", "time.(*Timer)",
	"time.newTimer", "time.Now", "time.now", "runtime.nanotime", "internal/sync."}

func classifyGo(stack []string) string {
	for _, r := range goStackRules {
		for _, f := range stack {
			if hasAnyPrefix(f, r.prefixes) {
				return r.part
			}
		}
	}
	leaf := stack[0]
	for _, f := range stack {
		if !hasAnyPrefix(f, goHelpers) {
			leaf = f
			break
		}
	}
	switch {
	case hasAnyPrefix(leaf, goSyncLeaves):
		return partSync
	case strings.HasPrefix(leaf, "encoding/base64."),
		strings.HasPrefix(leaf, "github.com/segmentio/asm/base64."), // the audio chunks' SIMD base64
		strings.HasPrefix(leaf, ownModule+"internal/audiob64."):
		return partBase64
	case strings.HasPrefix(leaf, "github.com/coder/websocket."):
		if strings.Contains(strings.ToLower(leaf), "mask") {
			return partMasking
		}
		return partFraming
	case strings.HasPrefix(leaf, "github.com/gobwas/ws."):
		if strings.Contains(strings.ToLower(leaf), "cipher") {
			return partMasking
		}
		return partFraming
	case strings.HasPrefix(leaf, ownModule+"internal/wsbuf."):
		return partFraming
	case strings.HasPrefix(leaf, "encoding/json."),
		strings.HasPrefix(leaf, ownModule+"transport/geminilive.scan"),
		strings.HasPrefix(leaf, ownModule+"transport/geminilive.(*scanner)"),
		strings.HasPrefix(leaf, ownModule+"protocol.Decode"):
		return partJSON
	case strings.HasPrefix(leaf, ownModule+"internal/evloop."):
		return partLoop // its system calls and the runtime's poll are caught above, by the stack
	case strings.HasPrefix(leaf, "google.golang.org/genai."):
		return partSDK
	case strings.HasPrefix(leaf, ownModule), strings.HasPrefix(leaf, "main."):
		return partOwn // main.: a relay's own command (cmd/relayfloor's loop frames and relays in it)
	case strings.HasPrefix(leaf, "runtime."):
		return partRuntime
	}
	return partNetStd
}

// V8: a sample's stack, leaf first, as function name and script URL ("" for
// the runtime's own entries and native functions).
type v8Frame struct{ name, url string }

func classifyV8(stack []v8Frame) string {
	leaf := stack[0]
	switch leaf.name {
	case "(garbage collector)":
		return partGC
	case "(program)":
		// Native code outside any JavaScript: libuv's poll loop, reading the
		// sockets, dispatching events into JS.
		return partSched
	}
	for _, f := range stack {
		if f.url != "" {
			return classifyV8Script(f)
		}
		name := strings.ToLower(f.name)
		switch {
		case strings.Contains(name, "base64"):
			return partBase64
		case f.name == "parse" || f.name == "stringify":
			return partJSON
		case name == "writev" || name == "writebuffer" || strings.HasPrefix(name, "write") && strings.HasSuffix(name, "string"):
			return partSyscall
		case strings.Contains(name, "mask"):
			return partMasking
		}
	}
	return partRuntime
}

func classifyV8Script(f v8Frame) string {
	switch {
	case strings.Contains(f.url, "/node_modules/ws/"):
		if strings.Contains(strings.ToLower(f.name), "mask") {
			return partMasking
		}
		return partFraming
	case strings.Contains(f.url, "/node_modules/@google/genai/"):
		return partSDK
	case strings.Contains(f.url, "/node_modules/"):
		return partNetStd
	case strings.HasPrefix(f.url, "node:"):
		return partNodeCore
	}
	return partOwn
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
