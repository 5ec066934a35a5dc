// The page's voice controls: the microphone button, the text ⇄ voice
// switch and the speaking indicator, wired to the protocol state
// (voicelink.js) and to sound (voice.js). Each control carries a
// data-state attribute (mic: off/starting/waiting/on; speaker:
// idle/buffering/playing; switch: text/voice, data-switching) so that
// styles and browser tests can follow it.

import { MIC_OFF, MIC_ON, MIC_STARTING, MIC_WAITING, VoiceLink } from "./voicelink.js";
import { AudioEngine, Microphone, Player } from "./voice.js";
import { IDLE } from "./playback.js";

// A voice.start or voice.stop that gets no `mode` answer in this time is
// given up on.
const SWITCH_TIMEOUT_MS = 15_000;

const MIC_LABEL = {
  [MIC_OFF]: "Start talking",
  [MIC_STARTING]: "Starting the microphone…",
  [MIC_WAITING]: "Switching to voice…",
  [MIC_ON]: "Mute the microphone",
};

export class VoicePanel {
  #link;
  #engine = new AudioEngine();
  #mic;
  #player;
  #micButton;
  #modeButton;
  #speaker;
  #note;
  #onChange;
  #blocked = false;
  #stopping = false; // the microphone is handing back its last frame
  #switchTimer = null;
  #soundHinted = false;

  // Counters for the debug view (?debug=1).
  audioFramesReceived = 0;
  audioBytesReceived = 0;
  interruptions = 0;
  playback = { state: IDLE, played: 0, buffered: 0, underruns: 0, dropped: 0, flushed: 0 };

  /** `note(text, kind)` shows a line in the transcript; onChange() runs
   * when the mode or the controls change. */
  constructor({ conn, micButton, modeButton, speaker, note, onChange = () => {} }) {
    this.#micButton = micButton;
    this.#modeButton = modeButton;
    this.#speaker = speaker;
    this.#note = note;
    this.#onChange = onChange;
    this.#link = new VoiceLink({ conn, onChange: () => this.#sync() });
    this.#mic = new Microphone(this.#engine, {
      onFrame: (buf) => this.#link.frame(buf),
      onEnded: () => {
        this.#note("The microphone went away (unplugged or taken by another application).", "warn");
        this.#stopMic();
      },
    });
    this.#player = new Player(this.#engine, {
      onReport: (report) => this.#report(report),
      onError: (message) => this.#note(`The answer cannot be played: ${message}`, "error"),
    });
    micButton.addEventListener("click", () => this.#toggleMic());
    modeButton.addEventListener("click", () => this.#toggleMode());
    // Browsers keep audio paused until the user interacts with the page.
    const resume = () => this.#engine.resume();
    document.addEventListener("pointerdown", resume, true);
    document.addEventListener("keydown", resume, true);
    this.#render();
  }

  /** The session's mode ("text", "voice" or null). */
  get mode() {
    return this.#link.mode;
  }

  /** True while microphone frames go to the gateway. */
  get micOn() {
    return this.#link.mic === MIC_ON;
  }

  /** Input is refused while the user is blocked: the microphone stops. */
  set blocked(value) {
    if (value === this.#blocked) return;
    this.#blocked = value;
    if (value) this.#stopMic();
    this.#render();
  }

  sessionReady(mode) {
    this.#link.sessionReady(mode);
  }

  /** A `mode` event. */
  modeChanged(mode) {
    this.#link.modeChanged(mode);
  }

  /** The connection's state changed ("connected", "reconnecting", …). */
  connection(state) {
    if (state === "connected") return;
    this.#link.disconnected();
    // The turn that was running is cancelled by the gateway: its speech is
    // not worth finishing.
    this.#player.flush();
    if (state === "stopped") this.#stopMic();
    this.#render();
  }

  /** An error event; true when it answered the mode switch just asked for. */
  error(code, message) {
    if (this.#link.switching === null || code === "turn_in_progress" || code === "turn_cancelled") return false;
    const to = this.#link.switching;
    this.#link.switchFailed();
    this.#note(`Could not switch to ${to} mode: ${message}`, "warn");
    return true;
  }

  /** A binary frame: the model's speech. */
  audio(buffer) {
    this.audioFramesReceived++;
    this.audioBytesReceived += buffer.byteLength;
    this.#player.push(buffer);
    if (!this.#soundHinted && this.#engine.suspended) {
      this.#soundHinted = true;
      this.#note("The browser is holding the sound back: click anywhere on the page to hear the answer.", "warn");
    }
  }

  /** audio.interrupted: the user spoke over the model. */
  interrupted() {
    this.interruptions++;
    this.#player.flush();
  }

  /** The user stopped the turn or left the conversation: silence now. */
  silence() {
    this.#player.flush();
  }

  /** Stops the microphone without a word to the gateway (a new chat). */
  reset() {
    this.#stopMic();
    this.#player.flush();
  }

  /** A live view of the counters, for ?debug=1 (browser tests read it). */
  debugView() {
    const panel = this;
    const link = this.#link;
    return {
      get mode() { return link.mode; },
      get switching() { return link.switching; },
      get mic() { return link.mic; },
      get micSampleRate() { return panel.#mic.sampleRate; },
      get framesSent() { return link.framesSent; },
      get bytesSent() { return link.bytesSent; },
      get framesDropped() { return link.framesDropped; },
      get audioEnds() { return link.audioEnds; },
      get audioFramesReceived() { return panel.audioFramesReceived; },
      get audioBytesReceived() { return panel.audioBytesReceived; },
      get playback() { return panel.playback.state; },
      get bytesPlayed() { return panel.playback.played * 2; },
      get bytesFlushed() { return panel.playback.flushed * 2; },
      get underruns() { return panel.playback.underruns; },
      get interruptions() { return panel.interruptions; },
    };
  }

  async #toggleMic() {
    this.#engine.resume();
    const link = this.#link;
    if (link.mic !== MIC_OFF) {
      await this.#stopMic();
      return;
    }
    link.micStarting();
    try {
      await this.#mic.start();
    } catch (err) {
      link.micFailed();
      this.#note(err?.message ?? String(err), "error");
      return;
    }
    if (link.mic !== MIC_STARTING) {
      // Pressed again (or the session changed) while the browser asked.
      await this.#mic.stop();
      return;
    }
    if (!link.micStarted()) {
      await this.#mic.stop();
      this.#note("Voice is not available right now (not connected).", "warn");
    }
  }

  #toggleMode() {
    this.#engine.resume();
    const link = this.#link;
    const sent = link.mode === "voice" ? link.requestText() : link.requestVoice();
    if (!sent) return;
    // Context for the first audio: the click is the user gesture that lets
    // the context start.
    if (link.switching === "voice") this.#engine.context().catch(() => {});
    clearTimeout(this.#switchTimer);
    this.#switchTimer = setTimeout(() => {
      if (link.switching === null) return;
      link.switchFailed();
      this.#note("The gateway did not answer the mode switch.", "warn");
    }, SWITCH_TIMEOUT_MS);
  }

  async #stopMic() {
    if (this.#stopping) return;
    if (!this.#mic.active) {
      this.#link.micStopped(null);
      return;
    }
    this.#stopping = true;
    this.#render();
    try {
      const tail = await this.#mic.stop();
      this.#link.micStopped(tail);
    } finally {
      this.#stopping = false;
      this.#render();
    }
  }

  #report(report) {
    if (report !== null && typeof report === "object") this.playback = report;
    this.#render();
  }

  // After every VoiceLink change: release a microphone the link gave up on
  // (the session left voice), then redraw.
  #sync() {
    if (this.#link.switching === null) clearTimeout(this.#switchTimer);
    if (this.#link.mic === MIC_OFF && this.#mic.active && !this.#stopping) this.#stopMic();
    this.#render();
    this.#onChange();
  }

  #render() {
    const link = this.#link;
    const mic = this.#micButton;
    const live = link.mode !== null;
    mic.dataset.state = link.mic;
    mic.setAttribute("aria-pressed", String(link.mic === MIC_ON || link.mic === MIC_WAITING));
    mic.setAttribute("aria-label", MIC_LABEL[link.mic]);
    mic.title = MIC_LABEL[link.mic];
    mic.disabled = this.#stopping || this.#blocked || (!live && link.mic === MIC_OFF);

    const mode = this.#modeButton;
    mode.dataset.mode = link.mode ?? "";
    mode.dataset.switching = link.switching ?? "";
    mode.textContent = link.switching !== null ? "Switching…" : link.mode === "voice" ? "Switch to text" : "Switch to voice";
    mode.disabled = !live || link.switching !== null || this.#blocked;

    const speaker = this.#speaker;
    speaker.dataset.state = this.playback.state;
    speaker.hidden = this.playback.state === IDLE;
  }
}
