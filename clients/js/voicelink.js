// The voice protocol state (docs/protocol.md, "Voice"): the session's
// mode, a mode switch waiting for its `mode` event, and the microphone's
// frames on their way to the gateway. It decides what goes out and when;
// capturing sound is devices.js's job. No DOM: Node tests drive it against
// a real Client.

/** The microphone states. */
export const MIC_OFF = "off";
export const MIC_STARTING = "starting"; // asking for the microphone
export const MIC_WAITING = "waiting"; // capturing; voice.start sent, the session is not in voice yet
export const MIC_ON = "on"; // frames go to the gateway

// Frames kept while waiting for the session to switch to voice: 2 s of
// 40 ms frames. Older ones are dropped first.
const MAX_WAITING_FRAMES = 50;

export class VoiceLink {
  #conn;
  #onChange;
  #waiting = []; // frames captured before the session was in voice

  /** The session's mode as the gateway last said ("text", "voice" or null
   * before session.ready). */
  mode = null;
  /** "voice" or "text" while a voice.start or voice.stop awaits its `mode`
   * event, else null. */
  switching = null;
  mic = MIC_OFF;
  framesSent = 0;
  bytesSent = 0;
  framesDropped = 0;
  audioEnds = 0;

  /** `conn` is the Client (send, sendAudio); onChange() runs after
   * every change of mode, switching or mic. */
  constructor({ conn, onChange = () => {} }) {
    this.#conn = conn;
    this.#onChange = onChange;
  }

  /** session.ready (new, resumed, or after a reconnect). */
  sessionReady(mode) {
    this.switching = null;
    this.#setMode(mode);
  }

  /** A `mode` event. */
  modeChanged(mode) {
    this.switching = null;
    this.#setMode(mode);
  }

  /** The connection dropped: no switch can be answered on this socket. */
  disconnected() {
    if (this.switching === null) return;
    this.switching = null;
    if (this.mic === MIC_WAITING) this.#micOff();
    this.#onChange();
  }

  /** The gateway refused the switch just asked for (an error event), or it
   * never answered. */
  switchFailed() {
    if (this.switching === null) return;
    this.switching = null;
    if (this.mic === MIC_WAITING) this.#micOff();
    this.#onChange();
  }

  /** Asks to switch a text session to voice; false when nothing was sent. */
  requestVoice() {
    if (this.mode !== "text" || this.switching !== null) return false;
    if (!this.#conn.send("voice.start")) return false;
    this.switching = "voice";
    this.#onChange();
    return true;
  }

  /** Asks to switch back to text (the microphone stops first); false when
   * nothing was sent. */
  requestText() {
    if (this.mode !== "voice" || this.switching !== null) return false;
    this.micStopped(null);
    if (!this.#conn.send("voice.stop")) return false;
    this.switching = "text";
    this.#onChange();
    return true;
  }

  /** The user pressed the microphone button: permission is being asked. */
  micStarting() {
    this.mic = MIC_STARTING;
    this.#onChange();
  }

  /** Capture runs. In a text session, voice.start goes out and frames wait
   * for the switch; false when the session cannot take voice now (the mic
   * is then off again). */
  micStarted() {
    if (this.mode === "voice") {
      this.mic = MIC_ON;
    } else if (this.switching === "voice" || this.requestVoice()) {
      this.mic = MIC_WAITING;
    } else {
      this.#micOff();
      this.#onChange();
      return false;
    }
    this.#onChange();
    return true;
  }

  /** The microphone could not start (permission denied, no device). */
  micFailed() {
    this.#micOff();
    this.#onChange();
  }

  /** One captured frame (PCM16 16 kHz): sent, kept until the session is in
   * voice, or dropped. */
  frame(buf) {
    if (this.mic === MIC_ON) {
      this.#sendFrame(buf);
    } else if (this.mic === MIC_WAITING) {
      this.#waiting.push(buf);
      if (this.#waiting.length > MAX_WAITING_FRAMES) {
        this.#waiting.shift();
        this.framesDropped++;
      }
    } else {
      this.framesDropped++;
    }
  }

  /** The microphone stopped (muted by the user, or the device went away):
   * the last partial frame `tail` (or null) and audio.end go out if the
   * session is taking audio. */
  micStopped(tail) {
    if (this.mic === MIC_OFF) return;
    if (this.mic === MIC_ON && this.mode === "voice") {
      if (tail !== null && tail.byteLength > 0) this.#sendFrame(tail);
      if (this.#conn.send("audio.end")) this.audioEnds++;
    }
    this.#micOff();
    this.#onChange();
  }

  #setMode(mode) {
    this.mode = mode === "voice" || mode === "text" ? mode : null;
    if (this.mode === "voice" && this.mic === MIC_WAITING) {
      this.mic = MIC_ON;
      const frames = this.#waiting;
      this.#waiting = [];
      for (const buf of frames) this.#sendFrame(buf);
    } else if (this.mode !== "voice" && (this.mic === MIC_ON || (this.mic === MIC_WAITING && this.switching === null))) {
      // The session left voice (end_voice_session, upstream lost, another
      // tab): audio is refused in text mode, so the microphone stops.
      this.#micOff();
    }
    this.#onChange();
  }

  #sendFrame(buf) {
    if (this.#conn.sendAudio(buf)) {
      this.framesSent++;
      this.bytesSent += buf.byteLength;
    } else {
      this.framesDropped++;
    }
  }

  #micOff() {
    this.mic = MIC_OFF;
    this.framesDropped += this.#waiting.length;
    this.#waiting = [];
  }
}
