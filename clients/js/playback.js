// The playback queue of the model's speech: a jitter buffer in front of the
// speaker. No browser globals: the playback worklet and the Node tests
// import it.

/** What the speaker is doing (the playback indicator's data-state). */
export const IDLE = "idle"; // nothing queued
export const BUFFERING = "buffering"; // audio queued, waiting for enough to start
export const PLAYING = "playing";

/**
 * Queued speech at `inRate` (24 kHz) rendered at `outRate` (the audio
 * context's rate) by linear interpolation. Upsampling (the usual case: 24 →
 * 44.1 or 48 kHz) needs no further filter for speech; a context slower than
 * 24 kHz would fold a little of the top octave back, which speech hardly has.
 *
 * Jitter buffer: playback starts once `startSamples` are queued (150 ms by
 * default), or once nothing more has arrived for that long (the end of a
 * short answer). When the queue runs dry mid-speech (an underrun) the
 * output is silence and playback waits for `startSamples` again, so a slow
 * network gives a pause and then fluent speech instead of stutter. At most
 * `maxSamples` are queued (audio beyond it is dropped and counted), so a
 * gateway sending faster than real time cannot grow memory without bound.
 * flush() drops everything queued at once (barge-in).
 *
 * All counts are in input samples.
 */
export class PlaybackQueue {
  #chunks = []; // Float32Array chunks at inRate
  #offset = 0; // read position in #chunks[0]
  #step; // input samples per output sample
  #frac = 0; // position between #a and #b
  #a = 0; // the last input sample passed
  #b = null; // the next input sample, taken from the queue
  #sincePush = 0; // input-sample time since the last push
  #dry = false; // the queue ran dry while playing and nothing came since
  #sinceDry = 0; // input-sample time since it ran dry

  state = IDLE;
  buffered = 0; // queued, not yet played
  played = 0; // taken from the queue and played
  dropped = 0; // refused because the queue was full
  flushed = 0; // dropped by flush()
  underruns = 0; // audio arrived less than startMs after the queue ran dry mid-speech

  constructor({ inRate = 24_000, outRate, startMs = 150, maxSeconds = 120 } = {}) {
    if (!(inRate > 0) || !(outRate > 0)) throw new RangeError(`bad rates ${inRate} → ${outRate}`);
    this.#step = inRate / outRate;
    this.startSamples = Math.max(1, Math.round((inRate * startMs) / 1000));
    this.maxSamples = Math.round(inRate * maxSeconds);
  }

  /** Queues samples (floats at inRate); returns how many were taken. */
  push(samples) {
    const room = Math.max(0, this.maxSamples - this.buffered);
    const take = Math.min(room, samples.length);
    this.dropped += samples.length - take;
    if (take > 0) {
      this.#chunks.push(take === samples.length ? samples : samples.subarray(0, take));
      this.buffered += take;
      this.#sincePush = 0;
      if (this.state === IDLE) {
        if (this.#dry && this.#sinceDry < this.startSamples) this.underruns++;
        this.#dry = false;
        this.state = BUFFERING;
      }
    }
    return take;
  }

  /** Drops everything queued (barge-in); returns how many samples. */
  flush() {
    const n = this.buffered;
    this.flushed += n;
    this.#reset();
    return n;
  }

  /** Fills `out` with the next output samples: speech, or silence while
   * buffering or after the queue ran dry. */
  render(out) {
    const elapsed = out.length * this.#step;
    let i = 0;
    if (this.state === IDLE) {
      this.#sinceDry += elapsed;
    } else if (this.state === BUFFERING) {
      this.#sincePush += elapsed;
      if (this.buffered >= this.startSamples || this.#sincePush >= this.startSamples) this.state = PLAYING;
    }
    if (this.state === PLAYING) {
      if (this.#b === null) this.#b = this.#take();
      for (; i < out.length && this.#b !== null; i++) {
        out[i] = this.#a + (this.#b - this.#a) * this.#frac;
        this.#frac += this.#step;
        while (this.#frac >= 1 && this.#b !== null) {
          this.#frac -= 1;
          this.#a = this.#b;
          this.#b = this.#take();
        }
      }
      if (this.#b === null) {
        // Ran dry: the end of an answer, or an underrun if more audio
        // follows soon (counted in push).
        this.#resetReader();
        this.state = IDLE;
        this.#sinceDry = 0;
        this.#dry = true;
      }
    }
    out.fill(0, i);
  }

  #take() {
    while (this.#chunks.length > 0) {
      const head = this.#chunks[0];
      if (this.#offset < head.length) {
        this.buffered--;
        this.played++;
        return head[this.#offset++];
      }
      this.#chunks.shift();
      this.#offset = 0;
    }
    return null;
  }

  #resetReader() {
    this.#frac = 0;
    this.#a = 0;
    this.#b = null;
  }

  #reset() {
    this.#chunks = [];
    this.#offset = 0;
    this.buffered = 0;
    this.#resetReader();
    this.#sincePush = 0;
    this.#dry = false;
    this.state = IDLE;
  }
}
