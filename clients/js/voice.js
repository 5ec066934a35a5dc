// Voice for a Client (docs/protocol.md, "Voice"): the protocol state
// (voicelink.js) wired to sound devices (devices.js in a browser, or any
// object with the same shape), a timeout for mode switches, barge-in, and
// playback counters. No DOM.

import { IDLE } from "./playback.js";
import { MIC_OFF, MIC_ON, MIC_STARTING, VoiceLink } from "./voicelink.js";

/** A voice.start or voice.stop that gets no `mode` answer in this time is
 * given up on. */
export const SWITCH_TIMEOUT_MS = 15_000;

export class Voice {
  #link;
  #devices = null; // made on first use
  #makeDevices;
  #emit;
  #switchTimeoutMs;
  #switchTimer = null;
  #stopping = false; // the microphone is handing back its last frame
  #blocked = false;
  #blockTimer = null;
  #suspendedTold = false;

  // Counters (the demo page's ?debug=1 view reads them).
  audioFramesReceived = 0;
  audioBytesReceived = 0;
  interruptions = 0;
  /** The speaker's last report: {state, played, buffered, underruns,
   * dropped, flushed} (counts in 24 kHz samples). */
  playback = { state: IDLE, played: 0, buffered: 0, underruns: 0, dropped: 0, flushed: 0 };

  /**
   * `conn` has send(type, fields) and sendAudio(buffer); `devices(handlers)`
   * makes {microphone, speaker, resume(), suspended} (null: no sound, e.g.
   * under Node); `emit(type, payload)` reports "voice" (the state changed),
   * "playback" (a speaker report), "switchFailed" and "audioError".
   */
  constructor({ conn, devices, emit, switchTimeoutMs = SWITCH_TIMEOUT_MS }) {
    this.#makeDevices = devices;
    this.#emit = emit;
    this.#switchTimeoutMs = switchTimeoutMs;
    this.#link = new VoiceLink({ conn, onChange: () => this.#sync() });
  }

  /** The session's mode as the gateway last said ("text", "voice", or null
   * before session.ready). */
  get mode() { return this.#link.mode; }
  /** "voice" or "text" while a switch awaits its `mode` event, else null. */
  get switching() { return this.#link.switching; }
  /** The microphone: "off", "starting", "waiting" (for the switch to
   * voice) or "on" (frames go to the gateway). */
  get mic() { return this.#link.mic; }
  get framesSent() { return this.#link.framesSent; }
  get bytesSent() { return this.#link.bytesSent; }
  get framesDropped() { return this.#link.framesDropped; }
  get audioEnds() { return this.#link.audioEnds; }
  /** The rate the microphone captures at before conversion (0 when off). */
  get micSampleRate() { return this.#devices?.microphone.sampleRate ?? 0; }
  /** True while the microphone hands back its last frame. */
  get stopping() { return this.#stopping; }

  /** While blocked (the `blocked` event) the microphone is off and cannot start. */
  get blocked() { return this.#blocked; }
  set blocked(value) {
    if (value === this.#blocked) return;
    this.#blocked = value;
    if (value) this.stopMic();
    this.#changed();
  }

  /** Keeps the microphone off until `until` (ms since the epoch): the
   * gateway refuses input while the user is blocked (the `blocked` event). */
  blockUntil(until) {
    clearTimeout(this.#blockTimer);
    this.#blockTimer = null;
    const wait = until - Date.now();
    if (!(wait > 0)) return;
    this.blocked = true;
    this.#blockTimer = setTimeout(() => {
      this.#blockTimer = null;
      this.blocked = false;
    }, Math.min(wait, 2 ** 31 - 1));
  }

  /** A plain copy of the state, for the "voice" event and UI frameworks. */
  snapshot() {
    return { mode: this.mode, switching: this.switching, mic: this.mic, stopping: this.#stopping, blocked: this.#blocked, playback: this.playback.state };
  }

  /**
   * Starts voice: with `mic` (the default) the microphone starts, and a text
   * session is asked to switch (its frames wait for the switch); without,
   * only the switch is asked for. Call it from a user gesture (a click), so
   * that the browser lets audio start. Resolves to true when it worked;
   * rejects with a sentence for the user when the microphone cannot start.
   */
  async start({ mic = true } = {}) {
    this.resumeAudio();
    if (mic) return this.startMic();
    if (this.mode === "voice") return true;
    const sent = this.#link.requestVoice();
    // The click is the gesture that lets the speaker's context start.
    if (sent) this.#warmUp();
    return sent;
  }

  /** Stops the microphone and switches back to text (the answer being
   * spoken plays out). False when nothing was sent. */
  async stop() {
    await this.stopMic();
    return this.#link.requestText();
  }

  /** Starts the microphone (see start). Resolves to true when frames flow
   * or wait for the switch to voice. */
  async startMic() {
    this.resumeAudio();
    const link = this.#link;
    if (link.mic !== MIC_OFF) return link.mic !== MIC_STARTING;
    if (this.#blocked) return false;
    const devices = this.#ensureDevices();
    if (devices === null) throw new Error("No microphone: this client was made without audio.");
    link.micStarting();
    try {
      await devices.microphone.start();
    } catch (err) {
      link.micFailed();
      throw err instanceof Error ? err : new Error(String(err));
    }
    if (link.mic !== MIC_STARTING) {
      // Stopped (or the session changed) while the browser asked.
      await devices.microphone.stop();
      return false;
    }
    if (!link.micStarted()) {
      await devices.microphone.stop();
      return false;
    }
    return true;
  }

  /** Stops the microphone: its last partial frame and audio.end go out. */
  async stopMic() {
    if (this.#stopping) return;
    const mic = this.#devices?.microphone;
    if (!mic?.active) {
      this.#link.micStopped(null);
      return;
    }
    this.#stopping = true;
    this.#changed();
    try {
      const tail = await mic.stop();
      this.#link.micStopped(tail);
    } finally {
      this.#stopping = false;
      this.#changed();
    }
  }

  /** Lets a browser play sound it holds back until the user interacts with
   * the page; call it from a click or key handler. */
  resumeAudio() {
    this.#devices?.resume();
  }

  /** Drops all queued speech now (a stopped turn, a new conversation). */
  silence() {
    this.#devices?.speaker.flush();
  }

  // ---- called by the Client ----

  sessionReady(mode) {
    this.#link.sessionReady(mode);
  }

  modeChanged(mode) {
    this.#link.modeChanged(mode);
  }

  /** The connection's state changed; anything but "ready" means no switch
   * can be answered on this socket, and a running turn was cancelled. */
  connection(state) {
    if (state === "ready") return;
    this.#link.disconnected();
    this.silence();
    if (state === "closed") this.stopMic();
  }

  /** An error event; true when it answered the switch just asked for. */
  error(code, message) {
    const to = this.#link.switching;
    if (to === null || code === "turn_in_progress" || code === "turn_cancelled" || code === "rate_limited") return false;
    this.#link.switchFailed();
    this.#emit("switchFailed", { to, code, message });
    return true;
  }

  /** A binary frame: the model's speech (PCM16 24 kHz). */
  audio(buffer) {
    this.audioFramesReceived++;
    this.audioBytesReceived += buffer.byteLength;
    const devices = this.#ensureDevices();
    if (devices === null) return;
    devices.speaker.push(buffer);
    if (!this.#suspendedTold && devices.suspended) {
      this.#suspendedTold = true;
      this.#emit("audioSuspended", {});
    }
  }

  /** audio.interrupted: the user spoke over the model. */
  interrupted() {
    this.interruptions++;
    this.silence();
  }

  /** A new conversation: the microphone stops without a word to the gateway. */
  reset() {
    this.stopMic();
    this.silence();
  }

  #ensureDevices() {
    if (this.#devices === null && this.#makeDevices) {
      this.#devices = this.#makeDevices({
        onFrame: (buf) => this.#link.frame(buf),
        onEnded: () => {
          this.#emit("audioError", { message: "The microphone went away (unplugged or taken by another application)." });
          this.stopMic();
        },
        onReport: (report) => {
          if (report !== null && typeof report === "object") this.playback = report;
          this.#emit("playback", this.playback);
          this.#changed();
        },
        onError: (message) => this.#emit("audioError", { message: `The answer cannot be played: ${message}` }),
      });
    }
    return this.#devices;
  }

  #warmUp() {
    this.#ensureDevices()?.warmUp?.().catch(() => {});
  }

  // After every VoiceLink change: time the switch, release a microphone
  // the link gave up on (the session left voice), tell the listeners.
  #sync() {
    const link = this.#link;
    if (link.switching === null) {
      clearTimeout(this.#switchTimer);
      this.#switchTimer = null;
    } else if (this.#switchTimer === null) {
      const to = link.switching;
      this.#switchTimer = setTimeout(() => {
        this.#switchTimer = null;
        if (link.switching === null) return;
        link.switchFailed();
        this.#emit("switchFailed", { to, code: "timeout", message: "The gateway did not answer the mode switch." });
      }, this.#switchTimeoutMs);
    }
    if (link.mic === MIC_OFF && this.#devices?.microphone.active && !this.#stopping) this.stopMic();
    this.#changed();
  }

  #changed() {
    this.#emit("voice", this.snapshot());
  }
}
