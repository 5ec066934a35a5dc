// The microphone's AudioWorklet processor (loaded by devices.js with
// audioWorklet.addModule, as a module from next to devices.js): downmixes each render quantum to mono, converts it from the
// context's rate to 16 kHz (audio.js: low-pass FIR, then decimation or
// interpolation), and posts PCM16 little-endian frames of exactly 40 ms
// (1280 bytes) to the main thread, which sends them to the gateway.
//
// Messages from the main thread: "stop" — post the unfinished last frame as
// {tail} (null when empty) and produce nothing more.
// Messages to the main thread: {frame: ArrayBuffer}, {tail: ArrayBuffer|null}.

import { Downsampler, FRAME_SAMPLES, FrameAssembler, MIC_RATE, downmix } from "./audio.js";

class MicProcessor extends AudioWorkletProcessor {
  #down = new Downsampler(sampleRate, MIC_RATE);
  #frames = new FrameAssembler(FRAME_SAMPLES);
  #stopped = false;

  constructor() {
    super();
    this.port.onmessage = (ev) => {
      if (ev.data !== "stop" || this.#stopped) return;
      this.#stopped = true;
      const tail = this.#frames.flush();
      this.port.postMessage({ tail }, tail === null ? [] : [tail]);
    };
  }

  process(inputs) {
    if (this.#stopped) return false;
    const channels = inputs[0];
    if (channels !== undefined && channels.length > 0) {
      for (const frame of this.#frames.push(this.#down.process(downmix(channels)))) {
        this.port.postMessage({ frame }, [frame]);
      }
    }
    return true;
  }
}

registerProcessor("turnstile-mic", MicProcessor);
