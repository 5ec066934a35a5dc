// The speaker's AudioWorklet processor (loaded by devices.js with
// audioWorklet.addModule): a jitter-buffered queue of the model's speech
// (playback.js), fed PCM16 24 kHz frames by the main thread and rendered at the
// context's rate.
//
// Messages from the main thread: an ArrayBuffer (PCM16 little-endian 24 kHz) to
// queue; "flush" to drop everything queued now (barge-in).
// Messages to the main thread: {state, played, buffered, underruns, dropped,
// flushed} (counts in 24 kHz samples) when the state changes, after each
// message, and every few render quanta while playing.

import { pcm16ToFloat } from "./audio.js";
import { PLAYING, PlaybackQueue } from "./playback.js";

// Render quanta (128 samples each) between progress reports while playing:
// about 43 ms at 48 kHz.
const REPORT_EVERY = 16;

class PlayerProcessor extends AudioWorkletProcessor {
  #queue;
  #state;
  #quanta = 0;

  constructor(options) {
    super();
    const { inRate = 24_000, startMs = 150, maxSeconds = 120 } = options?.processorOptions ?? {};
    this.#queue = new PlaybackQueue({ inRate, outRate: sampleRate, startMs, maxSeconds });
    this.#state = this.#queue.state;
    this.port.onmessage = (ev) => {
      if (ev.data instanceof ArrayBuffer) this.#queue.push(pcm16ToFloat(ev.data));
      else if (ev.data === "flush") this.#queue.flush();
      this.#report();
    };
  }

  process(_inputs, outputs) {
    const out = outputs[0];
    if (out === undefined || out.length === 0) return true;
    this.#queue.render(out[0]);
    for (let c = 1; c < out.length; c++) out[c].set(out[0]);
    this.#quanta++;
    const q = this.#queue;
    if (q.state !== this.#state || (q.state === PLAYING && this.#quanta % REPORT_EVERY === 0)) this.#report();
    return true;
  }

  #report() {
    const q = this.#queue;
    this.#state = q.state;
    this.port.postMessage({
      state: q.state,
      played: q.played,
      buffered: q.buffered,
      underruns: q.underruns,
      dropped: q.dropped,
      flushed: q.flushed,
    });
  }
}

registerProcessor("turnstile-player", PlayerProcessor);
