// Package audio converts telephone audio to and from what the voice engine
// speaks: G.711 μ-law at 8 kHz on the carrier side, PCM16LE mono at 16 kHz
// into Gemini Live and at 24 kHz out of it. It is the one place that knows
// sample rates and codecs; carriers (telephony/...) only move bytes.
//
// # API
//
// A call holds one [Inbound] and one [Outbound], each made by [NewInbound]
// and [NewOutbound] and used by one goroutine at a time:
//
//	in := audio.NewInbound()   // caller → model: μ-law 8 kHz → PCM16LE 16 kHz
//	out := audio.NewOutbound() // model → caller: PCM16LE 24 kHz → μ-law 8 kHz
//	pcm16k := in.Convert(buf[:0], mulawFrame)    // 160 bytes in, 640 out per 20 ms
//	mulaw := out.Convert(buf2[:0], pcm24kChunk)  // 960 bytes in, 160 out per 20 ms
//	out.Reset()                                  // after a barge-in: forget the old answer
//
// Convert appends to dst and returns the extended slice, like strconv's
// Append functions: with a dst of enough capacity ([InboundLen],
// [OutboundMaxLen]) it allocates nothing. Chunks may be of any size, odd
// byte counts of PCM included; the filters keep their state between calls,
// so converting a stream frame by frame gives exactly the bytes converting
// it whole would (no clicks at frame edges). Reset clears that state, for a
// new stream or after playback was cleared.
//
// [EncodeMulaw], [DecodeMulaw], [AppendMulaw] and [AppendPCM] are the bare
// codec at one rate, for WAV files and test clients; [NewOutboundFrom]
// converts from another source rate (a WAV file's 16, 44.1 or 48 kHz).
//
// # μ-law: a table, not a library
//
// G.711 μ-law is a fixed ITU-T mapping of 256 codes, thirty lines in its
// reference form. Decoding is a 256-entry table computed once from the
// standard's formula; encoding is the reference segment arithmetic (bias
// 0x84, clip 32635), a few shifts. The one Go library for it,
// github.com/zaf/g711, computes the same mapping; a dependency would not
// save code worth its weight, and the tests here pin the mapping to the
// standard's values (every code decodes and re-encodes to itself, 0xFF is
// silence, ±32124 are the extremes).
//
// # Resampling: polyphase FIR low-pass filters
//
// Both directions are rational resamplers (up by L, low-pass, down by M) in
// polyphase form, so only the output samples kept are computed and the
// zeros of the up-sampling are never multiplied:
//
//   - Inbound, 8 → 16 kHz (L=2): the low-pass removes the mirror image of
//     the telephone band that up-sampling creates above 4 kHz. Pass band
//     to 3.4 kHz, stop band from 4.6 kHz: centred on 4 kHz, so it is a
//     half-band filter (55 taps) whose every other tap is zero. One output
//     of two is the input sample itself (delayed); the other is 28 taps.
//   - Outbound, 24 → 8 kHz (M=3): the low-pass removes what the model says
//     above 4 kHz before decimation, where it would fold back into the
//     band as alias tones. Pass band to 3.4 kHz, stop band from 4.4 kHz:
//     what lies between 4 and 4.4 kHz folds to 3.6–4 kHz, above the
//     telephone band (ITU-T G.712 asks a channel for 14 dB at 4 kHz and
//     32 dB from 4.6 kHz; this filter gives 65 dB from 4.4 kHz). 97 taps,
//     one dot product per output sample; a stop band from 4 kHz would take
//     160.
//
// The filters are Kaiser-windowed sincs designed for 65 dB in the stop band
// (μ-law's own noise floor is about 38 dB below a loud tone, so more would
// not be heard), designed once when the package loads and shared read-only
// by every call. They are symmetric, so each pair of taps costs one
// multiplication. Their delays are 1.7 ms (in) and 2 ms (out).
package audio
