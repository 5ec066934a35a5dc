// Package fakegemini is a fake Gemini server for loopback use. It speaks the
// real wire protocols, so that the unmodified official SDKs (the Go SDK
// google.golang.org/genai and the JS SDK @google/genai) can talk to it, and
// delegates what the "model" says to a pluggable brain. Every green test of
// the gateway stands on it; cmd/fakegemini serves it as a binary.
//
// # What it serves
//
// On one port (Server.Start returns the http:// base URL; the Go SDK's Live
// client needs it as ws://, the JS SDK turns http:// into ws:// itself):
//
//   - Gemini API REST: POST /{v1|v1beta|v1alpha}/models/{model}:generateContent
//     and :streamGenerateContent?alt=sse, with an API key (x-goog-api-key or
//     ?key=; any non-empty key).
//   - Gemini API Live: the BidiGenerateContent WebSocket at
//     /ws/google.ai.generativelanguage.{v1|v1beta|v1alpha}.GenerativeService.BidiGenerateContent
//     (and BidiGenerateContentConstrained on v1alpha with an ephemeral
//     token). Repeated slashes are accepted: the JS SDK asks for "//ws/...".
//   - Vertex AI REST: POST /{v1|v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{model}:...,
//     and Vertex AI Live at
//     /ws/google.cloud.aiplatform.{v1|v1beta1}.LlmBidiService/BidiGenerateContent,
//     with "Authorization: Bearer TOKEN" (any non-empty token) instead of a
//     key; the Live setup names the model
//     "projects/{p}/locations/{l}/publishers/{pub}/models/{model}", and Live
//     usage comes in Vertex's field names. Request.API and LiveSession.API
//     say which API a call came through.
//
// # Brains
//
// A Brain answers REST calls: ScriptBrain (NewScript) for tests, one step
// per request; DemoBrain for the offline demo. Replies can stream text and
// function calls, fail before or during the stream (errors carry google.rpc
// details: ErrorReply, RateLimitReply with RetryInfo, InvalidAPIKeyReply with
// ErrorInfo), hang, end truncated, or refuse the prompt with
// promptFeedback.blockReason and no candidates (BlockedReply).
// RequireThoughtSignatures wraps any Brain as a thinking model that signs
// its function calls (thoughtSignature) and refuses a history that does not
// carry them back, as Gemini 3 models do.
//
// A LiveBrain runs Live connections: LiveScript hands each connection's
// LiveSession to the test, which reads the client's events and answers with
// the session's emitters; LiveDemo is the offline demo; LiveToolTurn is a scripted brain for ordering (a) below.
//
// # Scripted orderings the real Live service produces
//
// (a) A tool call before the turn ends, and the turn "complete" before the
// call is answered: model audio → toolCall → more audio →
// generationComplete → turnComplete, all before the client sends its
// toolResponse; the call stays pending and the client may answer it after
// turnComplete, after which the model speaks again. LiveSession.CallMidTurn
// sends it; AwaitToolResponse waits for the answer; LiveToolTurn answers
// every user turn this way.
//
// (b) Audio faster than real time: ~320 ms chunks of 24 kHz PCM16 sent about
// four times faster than they play, and turnComplete held back to the
// playout end. LiveSession.Speak sends Speech that way (Chunk and Speedup
// adjust it; Tone makes audio of a given length) and FinishTurn sends
// generationComplete at once and turnComplete at the playout end.
//
// # Strict mode
//
// Off by default. Strict(t, srv) (or Server.SetStrict) makes the fake
// record every malformed request as a violation (Server.Violations) and
// fails t at its end listing them; where the real service's reaction is
// known (or reasonably assumed) the fake reacts so too. It checks the REST
// history's function calls and responses (pairing, counts, ids the model
// never sent, calls answered twice: 400 INVALID_ARGUMENT), Live setups whose
// model is not "models/..." (or the Vertex resource name: close 1007), Live
// tool responses that match no call of the connection or answer one twice
// (close 1007), and Live clientContent sent while the model is speaking
// (recorded only; the real service accepts it and interrupts the model).
// Strict says what is known of the real service and what is assumed.
//
// # The demo's /call
//
// Both demo brains call any declared tool when the user types
// "/call NAME {json args}" (arguments optional), say so when NAME is not
// declared, and summarise the tool's result (ok or error) once it arrives.
// The rules (and their words) live in package fakedemo, shared with the
// fake OpenAI server's demo.
package fakegemini
