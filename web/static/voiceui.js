// The page's voice controls: the microphone button, the text ⇄ voice
// switch and the speaking indicator, wired to the client's voice (the
// client package's voice.js: protocol state, microphone and speaker). Each
// control carries a data-state attribute (mic: off/starting/waiting/on;
// speaker: idle/buffering/playing; switch: text/voice, data-switching) so
// that styles and browser tests can follow it.

import { IDLE, MIC_OFF, MIC_ON, MIC_STARTING, MIC_WAITING } from "/client/index.js";

const MIC_LABEL = {
  [MIC_OFF]: "Start talking",
  [MIC_STARTING]: "Starting the microphone…",
  [MIC_WAITING]: "Switching to voice…",
  [MIC_ON]: "Mute the microphone",
};

export class VoicePanel {
  #client;
  #voice;
  #micButton;
  #modeButton;
  #speaker;
  #note;
  #onChange;
  #pageBlocked = false;
  #failed = null; // the error code of the switch the client just gave up

  /** `note(text, kind)` shows a line in the transcript; onChange() runs
   * when the mode or the controls change. */
  constructor({ client, micButton, modeButton, speaker, note, onChange = () => {} }) {
    this.#client = client;
    this.#voice = client.voice;
    this.#micButton = micButton;
    this.#modeButton = modeButton;
    this.#speaker = speaker;
    this.#note = note;
    this.#onChange = onChange;
    client.on("voice", () => {
      this.#render();
      this.#onChange();
    });
    client.on("playback", () => this.#render());
    client.on("status", () => this.#render());
    // The client reports a refused switch before the error event itself.
    client.on("switchFailed", (f) => {
      this.#failed = f.code;
      this.#note(f.code === "timeout" ? f.message : `Could not switch to ${f.to} mode: ${f.message}`, "warn");
    });
    client.on("audioError", (e) => this.#note(e.message, "error"));
    client.on("audioSuspended", () => this.#note("The browser is holding the sound back: click anywhere on the page to hear the answer.", "warn"));
    micButton.addEventListener("click", () => this.#toggleMic());
    modeButton.addEventListener("click", () => this.#toggleMode());
    // Browsers keep audio paused until the user interacts with the page.
    const resume = () => this.#voice.resumeAudio();
    document.addEventListener("pointerdown", resume, true);
    document.addEventListener("keydown", resume, true);
    this.#render();
  }

  /** The session's mode ("text", "voice" or null). */
  get mode() {
    return this.#voice.mode;
  }

  /** True while microphone frames go to the gateway. */
  get micOn() {
    return this.#voice.mic === MIC_ON;
  }

  /** Input is refused while the user is blocked: the microphone stops. */
  set blocked(value) {
    if (value === this.#pageBlocked) return;
    this.#pageBlocked = value;
    this.#voice.blocked = value;
    this.#render();
  }

  /** True when an error event answered the switch just asked for (the
   * client has reported it as switchFailed, and it is noted already). */
  answersSwitch(code) {
    const answered = this.#failed === code;
    this.#failed = null;
    return answered;
  }

  /** A live view of the counters, for ?debug=1 (browser tests read it). */
  debugView() {
    const v = this.#voice;
    return {
      get mode() { return v.mode; },
      get switching() { return v.switching; },
      get mic() { return v.mic; },
      get micSampleRate() { return v.micSampleRate; },
      get framesSent() { return v.framesSent; },
      get bytesSent() { return v.bytesSent; },
      get framesDropped() { return v.framesDropped; },
      get audioEnds() { return v.audioEnds; },
      get audioFramesReceived() { return v.audioFramesReceived; },
      get audioBytesReceived() { return v.audioBytesReceived; },
      get playback() { return v.playback.state; },
      get bytesPlayed() { return v.playback.played * 2; },
      get bytesFlushed() { return v.playback.flushed * 2; },
      get underruns() { return v.playback.underruns; },
      get interruptions() { return v.interruptions; },
    };
  }

  async #toggleMic() {
    const v = this.#voice;
    if (v.mic !== MIC_OFF) {
      await v.stopMic();
      return;
    }
    try {
      if (!(await v.startMic()) && v.mic === MIC_OFF && !this.#client.ready) {
        this.#note("Voice is not available right now (not connected).", "warn");
      }
    } catch (err) {
      this.#note(err?.message ?? String(err), "error");
    }
  }

  #toggleMode() {
    const v = this.#voice;
    if (v.mode === "voice") v.stop();
    else v.start({ mic: false });
  }

  #render() {
    const v = this.#voice;
    const blocked = v.blocked || this.#pageBlocked;
    const mic = this.#micButton;
    const live = v.mode !== null && this.#client.ready;
    mic.dataset.state = v.mic;
    mic.setAttribute("aria-pressed", String(v.mic === MIC_ON || v.mic === MIC_WAITING));
    mic.setAttribute("aria-label", MIC_LABEL[v.mic]);
    mic.title = MIC_LABEL[v.mic];
    mic.disabled = v.stopping || blocked || (!live && v.mic === MIC_OFF);

    const mode = this.#modeButton;
    mode.dataset.mode = v.mode ?? "";
    mode.dataset.switching = v.switching ?? "";
    mode.textContent = v.switching !== null ? "Switching…" : v.mode === "voice" ? "Switch to text" : "Switch to voice";
    mode.disabled = !live || v.switching !== null || blocked;

    const speaker = this.#speaker;
    speaker.dataset.state = v.playback.state;
    speaker.hidden = v.playback.state === IDLE;
  }
}
