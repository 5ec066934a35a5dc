// The speaker's jitter buffer: it waits for enough speech before playing,
// plays at the context's rate, counts underruns, stays bounded, and drops
// everything at once on barge-in.

import assert from "node:assert/strict";
import { test } from "node:test";

import { PlaybackQueue } from "../index.js";

/** Runs steps on a queue at 24 kHz → outRate; returns, per step, the
 * queue's counters and what the step gave. */
function run({ outRate, startMs, maxSeconds }, steps) {
  const q = new PlaybackQueue({ inRate: 24_000, outRate, startMs, maxSeconds });
  return steps.map(([op, n]) => {
    let result = null;
    if (op === "push") result = q.push(new Float32Array(n).fill(0.5));
    else if (op === "flush") result = q.flush();
    else {
      const buf = new Float32Array(n);
      q.render(buf);
      result = { nonzero: buf.reduce((c, v) => c + (v !== 0 ? 1 : 0), 0), max: Math.max(...buf) };
    }
    const { state, buffered, played, dropped, flushed, underruns } = q;
    return { result, state, buffered, played, dropped, flushed, underruns };
  });
}

test("playback waits for a jitter buffer, then plays at the context's rate", () => {
  // 24 kHz into a 48 kHz context, start at 100 ms (2400 input samples).
  const s = run({ outRate: 48000, startMs: 100, maxSeconds: 60 }, [
    ["push", 1200], // 0: 50 ms
    ["render", 128], // 1: not enough yet: silence
    ["push", 1200], // 2: 100 ms: enough
    ["render", 4800], // 3: 100 ms of output: all the speech
    ["render", 128], // 4: ran dry: silence, idle
  ]);
  assert.equal(s[0].state, "buffering");
  assert.equal(s[1].state, "buffering");
  assert.equal(s[1].result.nonzero, 0, "played before the jitter buffer filled");
  assert.ok(s[3].result.nonzero >= 4790 && s[3].result.max === 0.5, `played ${s[3].result.nonzero} samples`);
  assert.equal(s[3].played, 2400);
  assert.equal(s[4].state, "idle");
  assert.equal(s[4].buffered, 0);
  assert.equal(s[4].result.nonzero, 0);
  assert.equal(s[4].underruns, 0, "the end of an answer is no underrun");
});

test("a short answer plays after a moment of quiet, and underruns are counted", () => {
  const s = run({ outRate: 48000, startMs: 100, maxSeconds: 60 }, [
    ["push", 480], // 0: a 20 ms answer, below the 100 ms threshold
    ["render", 2304], // 1: 48 ms: still waiting for more
    ["render", 2560], // 2: 100 ms without new audio: plays what there is
    ["push", 480], // 3: more speech right after running dry: an underrun
    ["render", 4800], // 4: waits again, then plays
    ["render", 4800], // 5
    ["render", 9600], // 6: a long silence
    ["push", 480], // 7: a new answer: not an underrun
  ]);
  assert.equal(s[1].result.nonzero, 0);
  assert.equal(s[1].state, "buffering");
  assert.ok(s[2].result.nonzero >= 950 && s[2].played === 480);
  assert.equal(s[3].underruns, 1);
  assert.equal(s[5].played, 960);
  assert.equal(s[7].underruns, 1, "a new answer after a long silence is no underrun");
});

test("flush drops everything queued at once, and the queue is bounded", () => {
  const s = run({ outRate: 44100, startMs: 150, maxSeconds: 1 }, [
    ["push", 24000], // 0: 1 s, the queue's bound
    ["push", 100], // 1: over the bound: dropped
    ["render", 4410], // 2: 100 ms plays
    ["flush"], // 3: barge-in
    ["render", 128], // 4: silence at once
    ["push", 2400], // 5: the next answer buffers from scratch
    ["render", 128], // 6
  ]);
  assert.equal(s[1].result, 0);
  assert.equal(s[1].dropped, 100);
  assert.ok(s[2].result.nonzero >= 4400 && s[2].state === "playing");
  const played = s[2].played;
  assert.ok(played >= 2395 && played <= 2402, `100 ms at 24 → 44.1 kHz consumed ${played}`);
  assert.equal(s[3].result, 24000 - played);
  assert.equal(s[3].flushed, 24000 - played);
  assert.equal(s[3].buffered, 0);
  assert.equal(s[3].state, "idle");
  assert.equal(s[4].result.nonzero, 0);
  assert.equal(s[6].result.nonzero, 0);
  assert.equal(s[6].state, "buffering");
});
