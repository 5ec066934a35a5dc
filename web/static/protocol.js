// The connection to the gateway (browser protocol v1, docs/protocol.md): open
// the WebSocket, start or resume the session, keep the link alive, and
// reconnect with backoff when it drops. It knows nothing about the page.

export const SUBPROTOCOL = "turnstile.v1";
export const PING_INTERVAL_MS = 20_000;

const STORAGE_KEY = "turnstile.session";
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 10_000;
// Microphone audio is dropped rather than queued behind this much unsent
// data (about 8 s of 16 kHz PCM16): a stalled link must not grow memory,
// and speech that late is no use to anyone.
const AUDIO_BACKLOG_BYTES = 256 * 1024;
// A ping unanswered (no frame at all) for this long means a dead link that
// the browser has not noticed yet (a sleeping laptop, a dropped NAT entry).
const PONG_TIMEOUT_MS = 10_000;

/** The gateway's WebSocket URL for a page at `loc`, passing the page's
 * ?access_token= through (browsers cannot set an Authorization header). */
export function gatewayURL(loc) {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  const url = new URL(`${scheme}//${loc.host}/v1/ws`);
  const token = new URLSearchParams(loc.search).get("access_token");
  if (token) url.searchParams.set("access_token", token);
  return url.toString();
}

/** Delay before reconnect attempt `attempt` (0-based): 0.5 s doubling to
 * 10 s, minus up to 30 % jitter so that clients dropped together by a deploy
 * do not come back in lockstep. */
export function backoffDelay(attempt, random = Math.random) {
  const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(attempt, 16));
  return Math.round(base * (0.7 + 0.3 * random()));
}

/** What to do after the gateway closed the socket with `code`:
 * "reconnect" (and resume), "restart" (forget the session, start a new one)
 * or "stop" (do not reconnect as is). */
export function closeAction(code) {
  if (code === 4004) return "restart";
  if (code >= 4100 && code <= 4199) return "reconnect";
  if (code >= 4000 && code <= 4099) return "stop";
  // 1000: the gateway closed on purpose. The others are errors that the same
  // page would only repeat: protocol error, unacceptable data, bad UTF-8,
  // policy violation, message too big, missing extension.
  if ([1000, 1002, 1003, 1007, 1008, 1009, 1010].includes(code)) return "stop";
  // 1001 going away, 1005/1006 no close frame (network loss), 1011-1015 and
  // anything unknown: the link failed, not this client.
  return "reconnect";
}

const CLOSE_TEXT = {
  1000: "The gateway closed the connection.",
  1009: "A message was too large for the gateway.",
  4001: "Your access token is no longer valid. Reload the page with a fresh one.",
  4002: "The gateway refused a message from this page (protocol violation).",
  4003: "You are blocked from this chat for now.",
  4005: "This conversation was opened in another tab or window.",
};

/** A sentence for the user about a close that stopped the connection. */
export function describeClose(code) {
  return CLOSE_TEXT[code] ?? "The gateway ended the connection.";
}

/**
 * One logical connection to the gateway across any number of WebSockets.
 *
 * onMessage(msg) gets every server message (parsed JSON objects with a
 * string `type`); onAudio(buffer) every binary frame (the model's speech,
 * an ArrayBuffer of PCM16 24 kHz) in order with them. onStatus(status) gets { state, ... } where state is
 * "connecting", "connected" (after session.ready), "reconnecting"
 * ({ delayMs, attempt, everConnected }) or "stopped" ({ code, reason }).
 */
export class Connection {
  #url;
  #storage;
  #onMessage;
  #onStatus;
  #onAudio;
  #ws = null;
  #ready = false;
  #stopped = true;
  #attempt = 0;
  #everConnected = false;
  #resuming = false; // the current socket asked to resume a stored session
  #retryTimer = null;
  #pingTimer = null;
  #lastFrameAt = 0;
  #lastPingAt = 0;

  constructor({ url, storage, onMessage, onStatus, onAudio = () => {} }) {
    this.#url = url;
    this.#storage = storage;
    this.#onMessage = onMessage;
    this.#onStatus = onStatus;
    this.#onAudio = onAudio;
  }

  /** True between session.ready and the socket's close. */
  get ready() {
    return this.#ready;
  }

  /** Connects (or reconnects after a stop), resuming the stored session. */
  connect() {
    this.#stopped = false;
    this.#attempt = 0;
    this.#open();
  }

  /** Forgets the stored session and connects to a new one. */
  newSession() {
    this.#forget();
    this.#abandon();
    this.connect();
  }

  /** Skips the rest of a backoff wait (e.g. when the network comes back). */
  retryNow() {
    if (this.#retryTimer !== null && !this.#stopped) this.#open();
  }

  /**
   * Sends a client message of `type` with `fields`. Only session.start may
   * go out before session.ready. Returns false when nothing was sent.
   * Every message goes through here, so a test can list what the page
   * sends: keep the type a string literal at each call.
   */
  send(type, fields = {}) {
    const ws = this.#ws;
    if (ws === null || ws.readyState !== WebSocket.OPEN) return false;
    if (!this.#ready && type !== "session.start") return false;
    ws.send(JSON.stringify({ ...fields, type }));
    return true;
  }

  /**
   * Sends microphone audio (an ArrayBuffer of PCM16 16 kHz, an even number
   * of bytes) as one binary frame. Returns false when nothing was sent: no
   * session yet, or too much unsent data already waiting.
   */
  sendAudio(buffer) {
    const ws = this.#ws;
    if (ws === null || ws.readyState !== WebSocket.OPEN || !this.#ready) return false;
    if (buffer.byteLength === 0 || buffer.byteLength % 2 !== 0) return false;
    if (ws.bufferedAmount > AUDIO_BACKLOG_BYTES) return false;
    ws.send(buffer);
    return true;
  }

  #open() {
    this.#abandon();
    this.#clearTimers();
    this.#onStatus({ state: this.#everConnected || this.#attempt > 0 ? "reconnecting" : "connecting", delayMs: 0 });
    let ws;
    try {
      ws = new WebSocket(this.#url, SUBPROTOCOL);
    } catch (err) {
      console.error("turnstile: cannot open WebSocket", err);
      this.#scheduleReconnect();
      return;
    }
    this.#ws = ws;
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      if (ws !== this.#ws) return;
      this.#lastFrameAt = Date.now();
      const saved = this.#load();
      this.#resuming = saved !== null;
      this.send("session.start", saved ? { resume: saved } : {});
      this.#pingTimer = setInterval(() => this.#tick(), PING_INTERVAL_MS);
    };
    ws.onmessage = (ev) => this.#receive(ws, ev);
    ws.onclose = (ev) => this.#closed(ws, ev.code, ev.reason);
    ws.onerror = () => {}; // always followed by close, which carries what we act on
  }

  #receive(ws, ev) {
    if (ws !== this.#ws) return;
    this.#lastFrameAt = Date.now();
    if (typeof ev.data !== "string") {
      if (this.#ready && ev.data instanceof ArrayBuffer) this.#onAudio(ev.data);
      return;
    }
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      console.warn("turnstile: ignoring a frame that is not JSON");
      return;
    }
    if (msg === null || typeof msg !== "object" || typeof msg.type !== "string") return;
    if (msg.type === "session.ready") {
      this.#save(msg.sessionId, msg.resumeToken);
      this.#ready = true;
      this.#attempt = 0;
      this.#everConnected = true;
      this.#onStatus({ state: "connected" });
    }
    this.#onMessage(msg);
  }

  #closed(ws, code, reason) {
    if (ws !== this.#ws) return; // a socket we already gave up on
    this.#ws = null;
    this.#ready = false;
    this.#clearTimers();
    if (this.#stopped) return;
    switch (closeAction(code)) {
      case "restart":
        this.#forget();
        // Start over at once, unless this socket was already a fresh start
        // (a gateway refusing those would otherwise be hammered).
        if (this.#resuming) this.#open();
        else this.#scheduleReconnect();
        return;
      case "stop":
        this.#stopped = true;
        this.#onStatus({ state: "stopped", code, reason });
        return;
      default:
        this.#scheduleReconnect();
    }
  }

  #tick() {
    const now = Date.now();
    // Judge only a ping of ours that went unanswered: timers in background
    // tabs may be throttled to once a minute, so silence alone proves nothing.
    if (this.#lastPingAt > this.#lastFrameAt && now - this.#lastPingAt >= PONG_TIMEOUT_MS) {
      console.warn("turnstile: no answer to ping; reconnecting");
      this.#abandon();
      this.#scheduleReconnect();
      return;
    }
    if (this.send("ping")) this.#lastPingAt = now;
  }

  #scheduleReconnect() {
    this.#clearTimers();
    const delayMs = backoffDelay(this.#attempt);
    this.#attempt++;
    this.#onStatus({ state: "reconnecting", delayMs, attempt: this.#attempt, everConnected: this.#everConnected });
    this.#retryTimer = setTimeout(() => this.#open(), delayMs);
  }

  // Drops the current socket without reacting to its close.
  #abandon() {
    const ws = this.#ws;
    this.#ws = null;
    this.#ready = false;
    if (ws === null) return;
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
    try {
      ws.close(1000);
    } catch {
      // already closing
    }
  }

  #clearTimers() {
    clearTimeout(this.#retryTimer);
    clearInterval(this.#pingTimer);
    this.#retryTimer = null;
    this.#pingTimer = null;
    this.#lastPingAt = 0;
  }

  #load() {
    try {
      const saved = JSON.parse(this.#storage.getItem(STORAGE_KEY) ?? "null");
      if (typeof saved?.sessionId === "string" && typeof saved?.resumeToken === "string") {
        return { sessionId: saved.sessionId, resumeToken: saved.resumeToken };
      }
    } catch {
      // unreadable or disabled storage: start a new session
    }
    return null;
  }

  #save(sessionId, resumeToken) {
    if (typeof sessionId !== "string" || typeof resumeToken !== "string") return;
    try {
      this.#storage.setItem(STORAGE_KEY, JSON.stringify({ sessionId, resumeToken }));
    } catch {
      // storage full or disabled: the session lasts as long as this socket
    }
  }

  #forget() {
    try {
      this.#storage.removeItem(STORAGE_KEY);
    } catch {
      // nothing stored
    }
  }
}
