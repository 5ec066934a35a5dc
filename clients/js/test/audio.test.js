// The microphone's path to the gateway: downmix, conversion to 16 kHz with
// an anti-alias low-pass, and PCM16 frames of exactly 40 ms.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { tone, zeroCrossings } from "./dsp.js";
import { Downsampler, FRAME_BYTES, FRAME_SAMPLES, FrameAssembler, MIC_RATE, PLAYBACK_RATE, downmix, pcm16ToFloat } from "../index.js";

/** One second of the given tones (one channel each) through the
 * microphone's converter in render quanta of 128 samples. */
function resample(inRate, tones) {
  const down = new Downsampler(inRate);
  const out = [];
  for (let start = 0; start < inRate; start += 128) {
    const n = Math.min(128, inRate - start);
    const channels = tones.map(({ freq, amp }) => {
      const ch = new Float32Array(n);
      for (let i = 0; i < n; i++) ch[i] = amp * Math.sin((2 * Math.PI * freq * (start + i)) / inRate);
      return ch;
    });
    out.push(...down.process(downmix(channels)));
  }
  return out;
}

test("microphone audio is 16 kHz PCM16 in 40 ms frames, as docs/protocol.md says", () => {
  assert.deepEqual({ MIC_RATE, PLAYBACK_RATE, FRAME_SAMPLES, FRAME_BYTES }, { MIC_RATE: 16000, PLAYBACK_RATE: 24000, FRAME_SAMPLES: 640, FRAME_BYTES: 1280 });
  const doc = readFileSync(new URL("../../../docs/protocol.md", import.meta.url), "utf8");
  for (const s of ["PCM16 little-endian mono 16 kHz", "PCM16 little-endian mono 24 kHz", "640–3200 bytes", "1280 bytes"]) {
    assert.ok(doc.includes(s), `docs/protocol.md does not say ${s}`);
  }
});

const cases = [
  { name: "48 kHz", inRate: 48000, tones: [{ freq: 1000, amp: 0.5 }], want1k: 0.5, alias: 0 },
  { name: "44.1 kHz", inRate: 44100, tones: [{ freq: 1000, amp: 0.5 }], want1k: 0.5, alias: 0 },
  { name: "16 kHz passes through", inRate: 16000, tones: [{ freq: 1000, amp: 0.5 }], want1k: 0.5, alias: 0 },
  { name: "stereo is averaged", inRate: 48000, tones: [{ freq: 1000, amp: 0.5 }, { freq: 1000, amp: 0 }], want1k: 0.25, alias: 0 },
  // 12 kHz is above 16 kHz's Nyquist frequency: without the low-pass it
  // would fold back to 4 kHz.
  { name: "12 kHz at 48 kHz", inRate: 48000, tones: [{ freq: 1000, amp: 0.5 }, { freq: 12000, amp: 0.5 }], want1k: 0.25, alias: 4000 },
  { name: "12 kHz at 44.1 kHz", inRate: 44100, tones: [{ freq: 1000, amp: 0.5 }, { freq: 12000, amp: 0.5 }], want1k: 0.25, alias: 4000 },
];

for (const c of cases) {
  test(`resampling to 16 kHz keeps speech and drops what would alias: ${c.name}`, () => {
    const out = resample(c.inRate, c.tones);
    assert.ok(out.length >= 15999 && out.length <= 16001, `1 s gave ${out.length} samples`);
    // Past the filter's start-up: 0.5 s, 500 whole cycles of 1 kHz.
    const win = out.slice(1000, 9000);
    const got = tone(win, 1000, 16000);
    assert.ok(Math.abs(got - c.want1k) <= 0.02 * c.want1k, `1 kHz amplitude ${got}, want ${c.want1k} ± 2 %`);
    assert.ok(tone(win, 1100, 16000) < 0.01, "the tone moved or spread");
    if (c.alias > 0) {
      const alias = tone(win, c.alias, 16000);
      assert.ok(alias < 0.005, `${c.alias} Hz alias amplitude ${alias}, want < 0.005 (−40 dB)`);
    } else {
      const zc = zeroCrossings(win);
      assert.ok(zc >= 998 && zc <= 1002, `${zc} zero crossings in 0.5 s, want 1000`);
      const peak = Math.max(...win.map(Math.abs));
      assert.ok(Math.abs(peak - c.want1k) <= 0.02 * c.want1k, `peak ${peak}`);
    }
  });
}

test("frames are exactly 40 ms, the tail flushes once, and samples clip", () => {
  const frames = new FrameAssembler();
  const sizes = [];
  for (const n of [42, 43, 43, 128, 1, 0, 639, 640, 641, 1000]) {
    for (const f of frames.push(new Float32Array(n).fill(0.25))) sizes.push(f.byteLength);
  }
  // 3177 samples in uneven chunks: four whole frames of 640, 617 left over.
  assert.deepEqual(sizes, [1280, 1280, 1280, 1280]);
  assert.equal(frames.flush().byteLength, 617 * 2);
  assert.equal(frames.flush(), null);

  const values = [0, 0.5, -0.5, 1, -1, 1.5, -1.5, 1e9, -1e9, NaN, 0.00001, -0.99999];
  const coded = new FrameAssembler(values.length).push(Float32Array.from(values))[0];
  const view = new DataView(coded);
  const pcm = values.map((_, i) => view.getInt16(i * 2, true));
  // Full scale is 32767 up and 32768 down; beyond it the samples clip.
  assert.deepEqual(pcm, [0, 16384, -16384, 32767, -32768, 32767, -32768, 32767, -32768, 0, 0, -32768]);
  const back = [...pcm16ToFloat(new Uint8Array(coded))].map((v) => Math.round(v * 1e5) / 1e5);
  assert.deepEqual(back, [0, 0.5, -0.5, 0.99997, -1, 0.99997, -1, 0.99997, -1, 0, 0, -1]);
});
