// Sound in the browser for voice mode: one AudioContext, the microphone
// (getUserMedia into mic-worklet.js) and the speaker (player-worklet.js).
// What is sent and when is voicelink.js's job. The worklets load from next
// to this file (import.meta.url), so a page on another origin can use them
// when the gateway serves this package with CORS (it does, at /client/).

import { PLAYBACK_RATE } from "./audio.js";

const MIC_WORKLET = new URL("./mic-worklet.js", import.meta.url);
const PLAYER_WORKLET = new URL("./player-worklet.js", import.meta.url);

// The jitter buffer: speech starts playing once this much is queued.
const START_MS = 150;
// Frames received before the speaker is ready (the worklet is loading):
// about 10 s of 40 ms frames.
const MAX_EARLY_FRAMES = 250;
// How long the microphone worklet may take to hand back its last frame.
const STOP_WAIT_MS = 250;

/** The page's AudioContext with both worklets loaded, made on first use.
 * Browsers start a context "suspended" until the user has interacted with
 * the page; resume() (from any click or key) lets it play. */
export class AudioEngine {
  #ready = null;
  ctx = null;

  /** Resolves to the running AudioContext; rejects with a sentence for the
   * user when this browser or page cannot do audio. */
  context() {
    if (this.#ready === null) {
      this.#ready = this.#open().catch((err) => {
        this.#ready = null; // let a later click try again
        throw err;
      });
    }
    return this.#ready;
  }

  /** True when the context exists but the browser holds it paused. */
  get suspended() {
    return this.ctx !== null && this.ctx.state === "suspended";
  }

  resume() {
    if (this.suspended) this.ctx.resume().catch(() => {});
  }

  async #open() {
    const Ctx = globalThis.AudioContext ?? globalThis.webkitAudioContext;
    if (Ctx === undefined) throw new Error("This browser cannot play or record audio.");
    const ctx = new Ctx({ latencyHint: "interactive" });
    if (ctx.audioWorklet === undefined) {
      ctx.close().catch(() => {});
      throw new Error("Audio needs a secure page (https, or http on localhost).");
    }
    try {
      await Promise.all([ctx.audioWorklet.addModule(MIC_WORKLET), ctx.audioWorklet.addModule(PLAYER_WORKLET)]);
    } catch (err) {
      ctx.close().catch(() => {});
      throw new Error(`Could not load the audio processors: ${err?.message ?? err}`);
    }
    this.ctx = ctx;
    return ctx;
  }
}

/** The microphone: PCM16 16 kHz frames of 40 ms to onFrame(ArrayBuffer);
 * onEnded() when the device goes away. */
export class Microphone {
  #engine;
  #onFrame;
  #onEnded;
  #stream = null;
  #source = null;
  #node = null;
  #tail = null; // resolves the pending stop() with the last partial frame

  constructor(engine, { onFrame, onEnded }) {
    this.#engine = engine;
    this.#onFrame = onFrame;
    this.#onEnded = onEnded;
  }

  get active() {
    return this.#node !== null;
  }

  /** The context's sample rate (what the worklet converts from), or 0. */
  get sampleRate() {
    return this.#engine.ctx?.sampleRate ?? 0;
  }

  /** Asks for the microphone and starts capturing. Rejects with a sentence
   * for the user when it cannot. */
  async start() {
    if (this.#node !== null) return;
    if (navigator.mediaDevices?.getUserMedia === undefined) {
      throw new Error("The microphone needs a secure page (https, or http on localhost).");
    }
    const ctx = await this.#engine.context();
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
      });
    } catch (err) {
      throw new Error(micError(err));
    }
    await ctx.resume().catch(() => {});
    const node = new AudioWorkletNode(ctx, "turnstile-mic", { numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1] });
    node.port.onmessage = (ev) => {
      if (ev.data?.frame instanceof ArrayBuffer) this.#onFrame(ev.data.frame);
      else if ("tail" in (ev.data ?? {})) this.#tail?.(ev.data.tail);
    };
    const source = ctx.createMediaStreamSource(stream);
    source.connect(node);
    // The node writes silence; connected, it is pulled by the graph in
    // every browser.
    node.connect(ctx.destination);
    for (const track of stream.getAudioTracks()) {
      track.addEventListener("ended", () => {
        if (this.#stream === stream) this.#onEnded();
      });
    }
    this.#stream = stream;
    this.#source = source;
    this.#node = node;
  }

  /** Stops capturing and releases the device (the browser's recording
   * indicator goes off). Resolves to the last, partial frame (or null). */
  async stop() {
    const node = this.#node;
    if (node === null) return null;
    const tail = await new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), STOP_WAIT_MS);
      this.#tail = (buf) => {
        clearTimeout(timer);
        resolve(buf instanceof ArrayBuffer ? buf : null);
      };
      node.port.postMessage("stop");
    });
    this.#tail = null;
    this.#source?.disconnect();
    node.disconnect();
    node.port.onmessage = null;
    for (const track of this.#stream?.getTracks() ?? []) track.stop();
    this.#stream = this.#source = this.#node = null;
    return tail;
  }
}

function micError(err) {
  switch (err?.name) {
    case "NotAllowedError":
    case "SecurityError":
      return "The microphone is blocked for this page. Allow it in the browser's site settings, then try again.";
    case "NotFoundError":
    case "OverconstrainedError":
      return "No microphone was found.";
    case "NotReadableError":
      return "The microphone is in use by another application or cannot be read.";
    default:
      return `The microphone could not start: ${err?.message ?? err}`;
  }
}

/** The speaker: queues the model's speech (PCM16 24 kHz frames) in the
 * player worklet; onReport({state, played, buffered, underruns, dropped,
 * flushed}) follows the worklet's progress (counts in 24 kHz samples). */
export class Speaker {
  #engine;
  #onReport;
  #onError;
  #node = null;
  #loading = false;
  #early = []; // frames received while the worklet loads

  constructor(engine, { onReport, onError }) {
    this.#engine = engine;
    this.#onReport = onReport;
    this.#onError = onError;
  }

  /** Queues one frame of speech. */
  push(buffer) {
    if (this.#node !== null) {
      this.#node.port.postMessage(buffer, [buffer]);
      return;
    }
    if (this.#early.length < MAX_EARLY_FRAMES) this.#early.push(buffer);
    this.#load();
  }

  /** Drops every queued frame now (barge-in, a stopped turn). */
  flush() {
    this.#early = [];
    this.#node?.port.postMessage("flush");
  }

  async #load() {
    if (this.#loading) return;
    this.#loading = true;
    try {
      const ctx = await this.#engine.context();
      const node = new AudioWorkletNode(ctx, "turnstile-player", {
        numberOfInputs: 0,
        numberOfOutputs: 1,
        outputChannelCount: [1],
        processorOptions: { inRate: PLAYBACK_RATE, startMs: START_MS },
      });
      node.port.onmessage = (ev) => this.#onReport(ev.data);
      node.connect(ctx.destination);
      this.#node = node;
      for (const buf of this.#early) node.port.postMessage(buf, [buf]);
      this.#early = [];
    } catch (err) {
      this.#early = [];
      this.#onError(err?.message ?? String(err));
    } finally {
      this.#loading = false;
    }
  }
}

/**
 * The browser's sound devices for a Client's voice (the default `audio`
 * option): one AudioContext made on first use, the microphone and the
 * speaker. `handlers` are onFrame(ArrayBuffer), onEnded(), onReport(report)
 * and onError(message).
 */
export function browserAudio(handlers) {
  const engine = new AudioEngine();
  return {
    microphone: new Microphone(engine, handlers),
    speaker: new Speaker(engine, handlers),
    resume: () => engine.resume(),
    get suspended() {
      return engine.suspended;
    },
    warmUp: () => engine.context(),
  };
}
