// One logical connection to the gateway (browser protocol v1,
// docs/protocol.md) across any number of WebSockets: open the socket with a
// token from the application's supplier, start or resume the session, keep
// the link alive, refresh the token before it expires, reconnect with
// backoff after the close codes that allow it, and hand every server message
// to the listeners as a typed event. Voice (microphone and speaker) is in
// voice.js. It knows nothing about any page.

import { backoffDelay, closeAction, describeClose, retryAfterMs } from "./close.js";
import { browserAudio } from "./devices.js";
import { Emitter } from "./emitter.js";
import { ResumeStore } from "./resume.js";
import { TokenSource } from "./token.js";
import { Voice } from "./voice.js";

export const SUBPROTOCOL = "turnstile.v1";
/** The token rides as the subprotocol `turnstile.auth.<token>` beside
 * SUBPROTOCOL (the gateway answers SUBPROTOCOL only): unlike a query
 * parameter, it is not written to proxies' access logs nor printed with the
 * URL in the browser console. */
export const AUTH_SUBPROTOCOL_PREFIX = "turnstile.auth.";
/** How often a ping goes out; a ping unanswered (no frame at all) for
 * PONG_TIMEOUT_MS means a dead link the browser has not noticed yet (a
 * sleeping laptop, a dropped NAT entry). */
export const PING_INTERVAL_MS = 20_000;
export const PONG_TIMEOUT_MS = 10_000;
/** The most history entries one `history` request may ask for. */
export const HISTORY_LIMIT_MAX = 100;
// Microphone audio is dropped rather than queued behind this much unsent
// data (about 8 s of 16 kHz PCM16): a stalled link must not grow memory,
// and speech that late is no use to anyone.
const AUDIO_BACKLOG_BYTES = 256 * 1024;
// Control characters other than newline and tab. The gateway strips control characters (keeping tab, newline
// and carriage return) rather than refusing them; the client removes these first, so that a message of nothing
// else is not sent at all.
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;
// A `history` request the gateway has not answered in this time is given up.
const HISTORY_TIMEOUT_MS = 15_000;
const OPEN = 1; // WebSocket.OPEN
/** Attempts in a row that never reached session.ready, before a client that
 * has never been connected gives up (the maxFailedAttempts option). */
export const MAX_FAILED_ATTEMPTS = 3;
/** The code of the terminal `error` event a client that gives up emits. */
export const UNREACHABLE_OR_REFUSED = "unreachable_or_refused";

/** The gateway's WebSocket URL for a page at `loc` (window.location): the
 * same host, /v1/ws, ws: or wss: as the page. */
export function gatewayURL(loc) {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/v1/ws`;
}

/** Opens a Client and connects it; see Client for the options. */
export function connect(options) {
  const client = new Client(options);
  client.connect();
  return client;
}

/**
 * The session.start fields a new session asks for (docs/profiles.md): the
 * page context (a plain JSON object, untrusted), an assistant profile, a
 * Live voice and a BCP-47 language. Types are checked here; what the
 * gateway allows (sizes, names, voices) it checks itself and refuses with
 * bad_message or profile_refused, closing 4002.
 */
function startAsks({ context, profile, voice, languageCode }) {
  const asks = {};
  if (context != null) {
    if (typeof context !== "object" || Array.isArray(context) || Object.getPrototypeOf(context) !== Object.prototype) {
      throw new TypeError("turnstile: context must be a plain object (it is sent as JSON)");
    }
    asks.context = context;
  }
  for (const [name, v] of Object.entries({ profile, voice, languageCode })) {
    if (v == null) continue;
    if (typeof v !== "string" || v === "") throw new TypeError(`turnstile: ${name} must be a non-empty string`);
    asks[name] = v;
  }
  return asks;
}

/**
 * A connection to the gateway. Listen with on(type, fn): every server
 * message by its type ("session.ready", "text.delta", …, and "message" for
 * all of them), "audio" (the model's speech, ArrayBuffers of PCM16 24 kHz,
 * each the listeners' own to keep),
 * "status" ({state: "connecting" | "ready" | "reconnecting" | "closed", …}),
 * "voice", "playback", "switchFailed", "audioError", "audioSuspended".
 */
export class Client {
  #url;
  #tokens;
  #tokenIn;
  #startMode;
  #asks; // what a new session's session.start asks for beyond its mode
  #resume; // the session to resume
  #WebSocket;
  #random;
  #backoff;
  #pingIntervalMs;
  #pongTimeoutMs;
  #maxFailed;
  #events = new Emitter();

  #ws = null;
  #generation = 0; // bumps whenever a connection attempt is given up on
  #ready = false;
  #stopped = true;
  #attempt = 0;
  #failed = 0; // attempts in a row that never reached session.ready
  #everConnected = false;
  #resuming = false; // the current socket asked to resume a stored session
  #reauthed = false; // a 4001 was answered with a fresh token, not yet a session.ready
  #retryTimer = null;
  #coolUntil = 0; // no connection before this (ms since the epoch): the wait a 4008 asked for
  #pingTimer = null;
  #lastFrameAt = 0;
  #lastPingAt = 0;
  #history = []; // pending history requests: {resolve, reject}

  /** "idle" (before connect), "connecting", "ready", "reconnecting", "closed". */
  status = "idle";
  sessionId = null;
  /** The session's mode ("text" or "voice"), null before session.ready. */
  mode = null;
  /** The highest turn number seen. */
  turn = 0;
  /** The oldest turn the client has history for (session.ready's history,
   * then each `history` page), or null; `history` requests go back from it. */
  oldestTurn = null;
  /** True when the gateway has older history than the client has seen. */
  moreHistory = false;
  /** Voice: microphone, speaker, mode switches. */
  voice;

  constructor({
    url,
    token = null,
    tokenIn = "subprotocol",
    mode = "text",
    context = null,
    profile = null,
    voice: liveVoice = null,
    languageCode = null,
    storage = null,
    storageKey = "turnstile.session",
    WebSocket: WS = globalThis.WebSocket,
    audio = browserAudio,
    random = Math.random,
    backoff = {},
    pingIntervalMs = PING_INTERVAL_MS,
    pongTimeoutMs = PONG_TIMEOUT_MS,
    maxFailedAttempts = MAX_FAILED_ATTEMPTS,
    refreshMarginMs = 60_000,
    switchTimeoutMs,
  }) {
    if (typeof url !== "string" || url === "") throw new TypeError("turnstile: connect needs a url");
    if (typeof WS !== "function") throw new TypeError("turnstile: no WebSocket here; pass one as the WebSocket option");
    this.#url = url;
    if (tokenIn !== "subprotocol" && tokenIn !== "query") throw new TypeError('turnstile: tokenIn must be "subprotocol" or "query"');
    this.#tokenIn = tokenIn;
    this.#tokens = new TokenSource(token, { marginMs: refreshMarginMs, onRefresh: () => this.#refresh() });
    this.#startMode = mode === "voice" ? "voice" : "text";
    this.#asks = startAsks({ context, profile, voice: liveVoice, languageCode });
    this.#resume = new ResumeStore(storage, storageKey);
    this.#WebSocket = WS;
    this.#random = random;
    this.#backoff = backoff;
    this.#pingIntervalMs = pingIntervalMs;
    this.#pongTimeoutMs = pongTimeoutMs;
    if (!(Number.isInteger(maxFailedAttempts) && maxFailedAttempts >= 1) && maxFailedAttempts !== Infinity) {
      throw new TypeError("turnstile: maxFailedAttempts must be a whole number of at least 1 (or Infinity)");
    }
    this.#maxFailed = maxFailedAttempts;
    this.voice = new Voice({
      conn: this,
      devices: audio || null,
      emit: (type, payload) => this.#emit(type, payload),
      switchTimeoutMs,
    });
  }

  /** True between session.ready and the socket's close. */
  get ready() {
    return this.#ready;
  }

  /** The token's expiry (ms since the epoch) as last known, or null. */
  get tokenExpiresAt() {
    return this.#tokens.expiresAt;
  }

  /** Listens for `type`; returns a function that stops listening. */
  on(type, fn) {
    return this.#events.on(type, fn);
  }

  off(type, fn) {
    this.#events.off(type, fn);
  }

  /** Connects (or reconnects after a close), resuming the session it had. */
  connect() {
    this.#stopped = false;
    this.#attempt = 0;
    this.#failed = 0;
    this.#reauthed = false;
    // In a microtask: listeners added right after connect() see "connecting".
    const gen = ++this.#generation;
    queueMicrotask(() => {
      if (gen !== this.#generation || this.#stopped) return;
      // The gateway closed 4008 and said when it takes this user again: it
      // refuses every connection until then, so wait (retryNow() does not skip it).
      const delayMs = this.#coolUntil - Date.now();
      if (delayMs <= 0) {
        this.#open();
        return;
      }
      this.#clearTimers();
      this.#setStatus({ state: "reconnecting", attempt: 0, delayMs, everConnected: this.#everConnected, cooldown: true });
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = null;
        if (gen === this.#generation && !this.#stopped) this.#open();
      }, delayMs);
    });
  }

  /** Forgets the session and connects to a new one. */
  newSession() {
    this.#forget();
    this.voice.reset();
    this.#abandon();
    this.connect();
  }

  /** Skips the rest of a backoff wait (e.g. when the network comes back). */
  retryNow() {
    if (this.#retryTimer !== null && !this.#stopped && Date.now() >= this.#coolUntil) this.#open();
  }

  /** Closes for good (until connect()); the session stays resumable. */
  close() {
    if (this.#stopped && this.#ws === null) return;
    this.#stopped = true;
    this.#abandon();
    this.#clearTimers();
    this.#setStatus({ state: "closed", by: "client", code: 1000, reason: "", message: "Disconnected." });
  }

  /**
   * Sends a client message of `type` with `fields`. Only session.start may
   * go out before session.ready. Returns false when nothing was sent. Every
   * message goes through here (a test lists what the client sends: keep the
   * type a string literal at each call).
   */
  send(type, fields = {}) {
    const ws = this.#ws;
    if (ws === null || ws.readyState !== OPEN) return false;
    if (!this.#ready && type !== "session.start") return false;
    ws.send(JSON.stringify({ ...fields, type }));
    return true;
  }

  /** Sends microphone audio (an ArrayBuffer of PCM16 16 kHz, an even number
   * of bytes) as one binary frame. False when nothing was sent: no session
   * yet, or too much unsent data already waiting. */
  sendAudio(buffer) {
    const ws = this.#ws;
    if (ws === null || ws.readyState !== OPEN || !this.#ready) return false;
    if (buffer.byteLength === 0 || buffer.byteLength % 2 !== 0) return false;
    if (ws.bufferedAmount > AUDIO_BACKLOG_BYTES) return false;
    ws.send(buffer);
    return true;
  }

  /** Sends a user message; false when there was nothing to send (empty
   * after removing control characters) or no session. */
  sendText(text) {
    const clean = String(text ?? "").replace(CONTROL, "").trim();
    if (clean === "") return false;
    return this.send("text", { text: clean });
  }

  /** Answers a confirm.request. */
  confirm(token, approve) {
    return this.send("confirm", { token, approve: approve === true });
  }

  /** Cancels the running turn; queued speech stops at once. */
  cancelTurn() {
    if (!this.send("turn.cancel")) return false;
    this.voice.silence();
    return true;
  }

  /** Starts voice (see Voice.start): the microphone, and a switch to voice. */
  startVoice(options) {
    return this.voice.start(options);
  }

  /** Stops the microphone and switches back to text. */
  stopVoice() {
    return this.voice.stop();
  }

  /**
   * Asks for older history: up to `limit` (1 to 100, default 50) entries
   * before turn `before` (exclusive; default: the oldest turn this client
   * has). Resolves to the gateway's `history` answer {entries, more}, oldest
   * first; rejects when there is no session, the connection drops first, or
   * no answer comes in 15 s.
   */
  loadHistory({ before = this.oldestTurn ?? this.turn + 1, limit = 50 } = {}) {
    const n = Math.min(HISTORY_LIMIT_MAX, Math.max(1, Math.floor(Number(limit) || 50)));
    if (!Number.isInteger(before) || before < 1) return Promise.reject(new Error("turnstile: no turn to load history before"));
    return new Promise((resolve, reject) => {
      if (!this.send("history", { before, limit: n })) {
        reject(new Error("turnstile: not connected"));
        return;
      }
      const pending = { resolve, reject, timer: null };
      pending.timer = setTimeout(() => {
        this.#history = this.#history.filter((p) => p !== pending);
        reject(new Error("turnstile: the gateway did not answer the history request"));
      }, HISTORY_TIMEOUT_MS);
      this.#history.push(pending);
    });
  }

  // ---- the connection ----

  async #open() {
    this.#abandon();
    this.#clearTimers();
    const gen = ++this.#generation;
    this.#setStatus(
      this.#everConnected || this.#attempt > 0
        ? { state: "reconnecting", attempt: this.#attempt, delayMs: 0, everConnected: this.#everConnected }
        : { state: "connecting" },
    );
    let url = this.#url;
    const protocols = [SUBPROTOCOL];
    if (this.#tokens.enabled) {
      let token;
      try {
        token = await this.#tokens.next();
      } catch (err) {
        if (gen === this.#generation && !this.#stopped) this.#fail(err);
        return;
      }
      if (gen !== this.#generation || this.#stopped) return;
      this.#tokens.sent(token);
      if (this.#tokenIn === "query") {
        const u = new URL(url);
        u.searchParams.set("access_token", token);
        url = u.toString();
      } else {
        protocols.push(AUTH_SUBPROTOCOL_PREFIX + token);
      }
    }
    let ws;
    try {
      ws = new this.#WebSocket(url, protocols);
    } catch (err) {
      console.error("turnstile: cannot open WebSocket", err);
      if (!this.#attemptFailed(0, "")) this.#scheduleReconnect();
      return;
    }
    this.#ws = ws;
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      if (ws !== this.#ws) return;
      this.#lastFrameAt = Date.now();
      const saved = this.#resume.load();
      this.#resuming = saved !== null;
      // A resume keeps what the session started with: the gateway ignores these then.
      this.send("session.start", saved ? { resume: saved } : { ...(this.#startMode === "voice" ? { mode: "voice" } : {}), ...this.#asks });
      this.#pingTimer = setInterval(() => this.#tick(), this.#pingIntervalMs);
    };
    ws.onmessage = (ev) => this.#receive(ws, ev);
    ws.onclose = (ev) => this.#closed(ws, ev.code, ev.reason);
    // An error is followed by a close, which carries what we act on; but a
    // socket that never opened may not close (Node 20's WebSocket), and a
    // failed connect is a close 1006 in any case.
    ws.onerror = () => {
      if (ws.readyState !== OPEN) this.#closed(ws, 1006, "");
    };
  }

  #receive(ws, ev) {
    if (ws !== this.#ws) return;
    this.#lastFrameAt = Date.now();
    if (typeof ev.data !== "string") {
      if (this.#ready && ev.data instanceof ArrayBuffer) {
        // The speaker transfers the buffer to its worklet (it is empty
        // afterwards): listeners get their own copy, made only when there
        // are any (docs/benchmarks.md, "The audio event").
        if (this.#events.has("audio")) this.#emit("audio", ev.data.slice(0));
        this.voice.audio(ev.data);
      }
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
    const extra = this.#handle(msg);
    this.#emit("message", msg);
    this.#emit(msg.type, msg);
    extra?.();
  }

  // Updates the client's state for a server message before the listeners
  // see it; returns what to do after them, if anything.
  #handle(msg) {
    if (Number.isInteger(msg.turn) && msg.type !== "session.ready") this.turn = Math.max(this.turn, msg.turn);
    switch (msg.type) {
      case "session.ready":
        this.#sessionReady(msg);
        break;
      case "auth.ok": {
        const at = typeof msg.expiresAt === "string" ? Date.parse(msg.expiresAt) : NaN;
        if (Number.isFinite(at)) this.#tokens.schedule(at);
        break;
      }
      case "history":
        this.#historyPage(msg);
        break;
      case "mode":
        this.mode = msg.mode === "voice" ? "voice" : "text";
        this.voice.modeChanged(this.mode);
        break;
      case "audio.interrupted":
        this.voice.interrupted();
        break;
      case "blocked": {
        const until = typeof msg.until === "string" ? Date.parse(msg.until) : NaN;
        return () => this.voice.blockUntil(until);
      }
      case "error":
        this.voice.error(String(msg.code ?? ""), String(msg.message ?? ""));
        break;
      case "turn.start":
      case "text.delta":
      case "text.done":
      case "transcript.input":
      case "transcript.output":
      case "tool.call":
      case "tool.args":
      case "tool.result":
      case "confirm.request":
      case "confirm.done":
      case "turn.done":
      case "handoff":
      case "handoff.pending":
      case "handoff.ended":
      case "pong":
        break; // the listeners' business
      default:
        break; // a type this client does not know yet: still passed on
    }
    return null;
  }

  #sessionReady(msg) {
    this.#resume.save(msg.sessionId, msg.resumeToken);
    this.sessionId = typeof msg.sessionId === "string" ? msg.sessionId : null;
    this.mode = msg.mode === "voice" ? "voice" : "text";
    this.turn = Number.isInteger(msg.turn) ? msg.turn : 0;
    const turns = (Array.isArray(msg.history) ? msg.history : []).map((e) => e?.turn).filter(Number.isInteger);
    this.oldestTurn = turns.length > 0 ? Math.min(...turns) : null;
    this.moreHistory = msg.historyTruncated === true;
    this.#ready = true;
    this.#attempt = 0;
    this.#failed = 0;
    this.#reauthed = false;
    this.#everConnected = true;
    this.voice.sessionReady(this.mode);
    this.#setStatus({ state: "ready", resumed: msg.resumed === true });
  }

  #historyPage(msg) {
    const entries = Array.isArray(msg.entries) ? msg.entries : [];
    const turns = entries.map((e) => e?.turn).filter(Number.isInteger);
    if (turns.length > 0) this.oldestTurn = Math.min(this.oldestTurn ?? Infinity, ...turns);
    this.moreHistory = msg.more === true;
    const pending = this.#history.shift();
    if (pending === undefined) return;
    clearTimeout(pending.timer);
    pending.resolve({ entries, more: msg.more === true });
  }

  #closed(ws, code, reason) {
    if (ws !== this.#ws) return; // a socket we already gave up on
    const wasReady = this.#ready;
    this.#ws = null;
    this.#ready = false;
    this.#clearTimers();
    this.#rejectHistory();
    if (this.#stopped) return;
    // 1006: no close frame. A socket that never opened ends so whatever the
    // reason: the gateway refused the upgrade (an Origin not allowed, a
    // token refused: browsers hide the HTTP answer), or nothing answered.
    if (code === 1006 && !wasReady && this.#attemptFailed(code, reason)) return;
    switch (closeAction(code)) {
      case "reauth":
        // The token stopped being valid: a fresh one from the supplier and
        // a resume, once. A second 4001 before a session is ready is final.
        if (this.#tokens.enabled && !this.#reauthed) {
          this.#reauthed = true;
          this.#open();
          return;
        }
        this.#stop(code, reason);
        return;
      case "restart":
        this.#forget();
        // Start over at once, unless this socket was already a fresh start
        // (a gateway refusing those would otherwise be hammered).
        if (this.#resuming) this.#open();
        else this.#scheduleReconnect();
        return;
      case "stop":
        this.#stop(code, reason);
        return;
      default:
        this.#scheduleReconnect();
    }
  }

  // Counts an attempt that could not reach the gateway's session.ready; a
  // client that has never been connected stops after maxFailedAttempts of
  // them in a row, and says why (true). One that was connected keeps trying:
  // a network drop or a gateway restart are expected, and it resumes.
  #attemptFailed(code, reason) {
    this.#failed++;
    if (this.#everConnected || this.#failed < this.#maxFailed) return false;
    this.#stopped = true;
    this.#abandon();
    this.#clearTimers();
    const message =
      `Could not reach the gateway's session ${this.#failed} times in a row, so the client stopped trying. ` +
      "Likely causes: this page's Origin is not allowed (TURNSTILE_ALLOWED_ORIGINS), the access token was refused " +
      "(wrong secret, audience or issuer, or expired), or the gateway is down or unreachable at this URL. " +
      'Browsers do not show why an upgrade failed: the gateway\'s log says ("connection refused", with the reason). ' +
      "See docs/troubleshooting.md, \"Stuck reconnecting\".";
    this.#emit("error", { type: "error", code: UNREACHABLE_OR_REFUSED, message, retryable: false, attempts: this.#failed });
    this.#setStatus({ state: "closed", by: "unreachable", code, reason: String(reason ?? ""), message });
    return true;
  }

  #stop(code, reason) {
    this.#stopped = true;
    const status = { state: "closed", by: "server", code, reason: String(reason ?? ""), message: describeClose(code) };
    const wait = retryAfterMs(reason);
    if (wait !== null) {
      this.#coolUntil = Date.now() + wait;
      status.retryAfterMs = wait;
      status.message += ` Try again in ${Math.ceil(wait / 1000)} s.`;
    }
    this.#setStatus(status);
  }

  // A token supplier that threw or gave nothing usable: no connection can
  // be made, so the client stops (retrying would only repeat it).
  #fail(err) {
    this.#stopped = true;
    this.#abandon();
    this.#clearTimers();
    const why = err instanceof Error ? err.message : String(err);
    this.#setStatus({ state: "closed", by: "token", code: 0, reason: "", message: `Could not get an access token: ${why}`, error: err });
  }

  // The token in use is about to expire: a fresh one goes out in `auth`.
  async #refresh() {
    const gen = this.#generation;
    let token;
    try {
      token = await this.#tokens.next();
    } catch (err) {
      if (gen === this.#generation && !this.#stopped) this.#fail(err);
      return;
    }
    // The same token again (a fixed one) refreshes nothing: the gateway
    // closes 4001 at its expiry, and the reconnect reports it. Not ready
    // (reconnecting): the next socket takes a fresh token anyway.
    if (gen !== this.#generation || this.#stopped || this.#tokens.isCurrent(token)) return;
    if (this.send("auth", { token })) this.#tokens.sent(token);
  }

  #tick() {
    const now = Date.now();
    // Judge only a ping of ours that went unanswered: timers in background
    // tabs may be throttled to once a minute, so silence alone proves nothing.
    if (this.#lastPingAt > this.#lastFrameAt) {
      if (now - this.#lastPingAt < this.#pongTimeoutMs) return; // still waiting for it
      console.warn("turnstile: no answer to ping; reconnecting");
      this.#abandon();
      this.#scheduleReconnect();
      return;
    }
    if (this.send("ping")) this.#lastPingAt = now;
  }

  #scheduleReconnect() {
    this.#clearTimers();
    const delayMs = backoffDelay(this.#attempt, this.#random, this.#backoff);
    this.#attempt++;
    this.#setStatus({ state: "reconnecting", delayMs, attempt: this.#attempt, everConnected: this.#everConnected });
    this.#retryTimer = setTimeout(() => this.#open(), delayMs);
  }

  // Drops the current socket without reacting to its close.
  #abandon() {
    this.#generation++;
    const ws = this.#ws;
    this.#ws = null;
    this.#ready = false;
    this.#rejectHistory();
    if (ws !== null) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      try {
        ws.close(1000);
      } catch {
        // already closing
      }
    }
  }

  #clearTimers() {
    clearTimeout(this.#retryTimer);
    clearInterval(this.#pingTimer);
    this.#tokens.cancel();
    this.#retryTimer = null;
    this.#pingTimer = null;
    this.#lastPingAt = 0;
  }

  #rejectHistory() {
    const pending = this.#history;
    this.#history = [];
    for (const p of pending) {
      clearTimeout(p.timer);
      p.reject(new Error("turnstile: the connection dropped before the history came"));
    }
  }

  #setStatus(status) {
    this.status = status.state;
    this.voice.connection(status.state);
    this.#emit("status", status);
  }

  #emit(type, payload) {
    this.#events.emit(type, payload);
  }

  #forget() {
    this.#resume.forget();
    this.sessionId = null;
  }
}
