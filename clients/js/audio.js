// Audio sample processing for voice mode: no browser globals, so the
// microphone worklet, the page and the Node tests all import it.
//
// The gateway takes PCM16 little-endian mono at 16 kHz from the browser
// and sends PCM16 little-endian mono at 24 kHz back (docs/protocol.md,
// "Voice").

/** The rate of the audio the page sends (microphone). */
export const MIC_RATE = 16_000;
/** The rate of the audio the gateway sends (the model's speech). */
export const PLAYBACK_RATE = 24_000;
/** Samples per microphone frame: 40 ms at 16 kHz. */
export const FRAME_SAMPLES = 640;
/** Bytes per microphone frame (PCM16). */
export const FRAME_BYTES = FRAME_SAMPLES * 2;

/** Averages the channels of one render quantum (arrays of Float32Array)
 * into one; a single channel is returned as is. */
export function downmix(channels) {
  if (channels.length === 0) return new Float32Array(0);
  if (channels.length === 1) return channels[0];
  const out = new Float32Array(channels[0].length);
  for (const ch of channels) {
    for (let i = 0; i < out.length; i++) out[i] += ch[i];
  }
  const scale = 1 / channels.length;
  for (let i = 0; i < out.length; i++) out[i] *= scale;
  return out;
}

/** A float sample in [-1, 1] as a PCM16 value: clipped, NaN as 0. */
export function toPCM16(sample) {
  if (!(sample > -1)) return sample <= -1 ? -32768 : 0; // also catches NaN
  if (sample >= 1) return 32767;
  return Math.round(sample < 0 ? sample * 32768 : sample * 32767);
}

/** PCM16 little-endian bytes (an ArrayBuffer or a view) as floats in
 * [-1, 1). A trailing odd byte is ignored. */
export function pcm16ToFloat(bytes) {
  const view = ArrayBuffer.isView(bytes)
    ? new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    : new DataView(bytes);
  const out = new Float32Array(view.byteLength >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
}

/** Blackman-windowed sinc low-pass: `taps` (odd) coefficients with cutoff
 * `cutoff` as a fraction of the sample rate, normalized to unity gain at DC. */
export function lowPass(taps, cutoff) {
  const h = new Float32Array(taps);
  const mid = (taps - 1) / 2;
  let sum = 0;
  for (let i = 0; i < taps; i++) {
    const x = i - mid;
    const sinc = x === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * x) / (Math.PI * x);
    const w = 0.42 - 0.5 * Math.cos((2 * Math.PI * i) / (taps - 1)) + 0.08 * Math.cos((4 * Math.PI * i) / (taps - 1));
    h[i] = sinc * w;
    sum += h[i];
  }
  for (let i = 0; i < taps; i++) h[i] /= sum;
  return h;
}

/**
 * Streaming sample-rate converter from `inRate` down to `outRate` (16 kHz
 * for the microphone), for any ratio (48 kHz, 44.1 kHz, …).
 *
 * Downsampling first runs the input through a windowed-sinc FIR low-pass
 * (cutoff 0.45 × outRate, i.e. 7.2 kHz for 16 kHz out; about one tap per
 * kHz of input rate, Blackman window: roughly −74 dB stop band), so that
 * what lies above the new Nyquist frequency does not fold back into the
 * speech band. The filtered signal, still at the input rate and so
 * oversampled at least 2×, is then read at the output positions with linear
 * interpolation; for an integer ratio (48 → 16 kHz) every position falls on
 * a sample and this is plain decimation. When inRate ≤ outRate there is
 * nothing to filter and only the interpolation runs. The filter delays the
 * signal by (taps − 1) / 2 input samples (0.5 ms at 48 kHz).
 */
export class Downsampler {
  #step; // input samples per output sample
  #h = null; // FIR coefficients, or null for none
  #hist; // the last taps − 1 input samples, oldest first
  #prev = 0; // the last filtered sample
  #pos = 1; // next output position, relative to the sample before #prev's successor

  constructor(inRate, outRate = MIC_RATE) {
    if (!(inRate > 0) || !(outRate > 0)) throw new RangeError(`bad rates ${inRate} → ${outRate}`);
    this.#step = inRate / outRate;
    if (inRate > outRate) {
      const taps = 2 * Math.round(inRate / 2000) + 1;
      this.#h = lowPass(taps, (0.45 * outRate) / inRate);
      this.#hist = new Float32Array(taps - 1);
    }
  }

  /** Converts the next chunk of input; returns the output samples it
   * completes (their number varies from call to call). */
  process(input) {
    const out = new Float32Array(Math.ceil((input.length + 1) / this.#step) + 1);
    let n = 0;
    for (let i = 0; i < input.length; i++) {
      const y = this.#h === null ? input[i] : this.#filter(input[i]);
      while (this.#pos <= 1) {
        out[n++] = this.#prev + (y - this.#prev) * this.#pos;
        this.#pos += this.#step;
      }
      this.#pos -= 1;
      this.#prev = y;
    }
    return out.subarray(0, n);
  }

  #filter(x) {
    const h = this.#h;
    const hist = this.#hist;
    const last = hist.length;
    // y = Σ h[k]·x[n−k]: h is symmetric, so its order does not matter.
    let acc = h[last] * x;
    for (let k = 0; k < last; k++) acc += h[k] * hist[k];
    hist.copyWithin(0, 1);
    hist[last - 1] = x;
    return acc;
  }
}

/** Cuts a stream of float samples into PCM16 little-endian frames of
 * exactly `frameSamples` samples (ArrayBuffers of 2 × frameSamples bytes). */
export class FrameAssembler {
  #frame;
  #view;
  #fill = 0;

  constructor(frameSamples = FRAME_SAMPLES) {
    this.frameSamples = frameSamples;
    this.#newFrame();
  }

  /** Adds samples; returns the frames they complete, oldest first. */
  push(samples) {
    const done = [];
    for (let i = 0; i < samples.length; i++) {
      this.#view.setInt16(this.#fill * 2, toPCM16(samples[i]), true);
      if (++this.#fill === this.frameSamples) {
        done.push(this.#frame);
        this.#newFrame();
      }
    }
    return done;
  }

  /** The samples of an unfinished frame as a shorter frame (null when
   * none), e.g. before the microphone pauses; the next push starts afresh. */
  flush() {
    if (this.#fill === 0) return null;
    const tail = this.#frame.slice(0, this.#fill * 2);
    this.#newFrame();
    return tail;
  }

  #newFrame() {
    this.#frame = new ArrayBuffer(this.frameSamples * 2);
    this.#view = new DataView(this.#frame);
    this.#fill = 0;
  }
}
