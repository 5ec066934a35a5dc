// Package fakeserve holds what the fake model servers (fakegemini,
// fakeopenai) share beneath their wire formats: the HTTP server lifecycle
// (listen on loopback, track every request so that Close ends hanging
// streams and waits for them, refuse requests after Close), the scripted
// brain tests drive them with, and the REST streaming loop (OpenSSE,
// SendChunks: each chunk paced, built and sent as one "data:" event).
package fakeserve
