// Package fakegemini is a fake Gemini API server for loopback use: it speaks
// the real REST/SSE wire protocol (generateContent and
// streamGenerateContent?alt=sse) so that the unmodified
// google.golang.org/genai client can talk to it, and it delegates what the
// "model" says to a pluggable Brain. Tests program a ScriptBrain; the offline
// demo runs the rule-based DemoBrain.
package fakegemini
