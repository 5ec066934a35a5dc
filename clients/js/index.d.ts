// Types of @turnstile-gw/client (browser protocol v1, docs/protocol.md in the
// Turnstile repository). Hand-written; test/types.ts checks them against use.

// ---------------------------------------------------------------- protocol

export type Mode = "text" | "voice";

/** A conversation entry of session.ready's `history` and of `history` pages. */
export interface HistoryEntry {
  role: "user" | "model";
  text: string;
  turn: number;
  /** "confirmation": a turn the gateway started after the user answered a confirmation; "handoff": written while a person
   * had the conversation; "greeting": the model's entry of turn 0, its profile's greeting. */
  kind?: "confirmation" | "handoff" | "greeting" | (string & {});
}

/** A tool of the session's current mode (session.ready and mode `tools`). */
export interface ToolInfo {
  name: string;
  modes: Mode[];
  requiresConfirmation: boolean;
  terminal: boolean;
}

export interface SessionReadyMessage {
  type: "session.ready";
  sessionId: string;
  /** Secret: keep it like a password (it resumes the session). */
  resumeToken: string;
  mode: Mode;
  resumed: boolean;
  registryVersion: string;
  registryChanged?: boolean;
  /** The session's turn counter. */
  turn: number;
  model: { name: string; offline: boolean };
  notice?: string;
  /** On resume: the latest history, oldest first. */
  history?: HistoryEntry[];
  /** True when older entries exist than `history` holds (Client.loadHistory). */
  historyTruncated?: boolean;
  pendingConfirmations?: ConfirmRequestMessage[];
  tools?: ToolInfo[];
}

export interface AuthOkMessage {
  type: "auth.ok";
  /** RFC 3339: the connection lasts until then unless refreshed again. */
  expiresAt: string;
}

export interface HistoryMessage {
  type: "history";
  entries: HistoryEntry[];
  more: boolean;
}

export interface TurnStartMessage {
  type: "turn.start";
  turn: number;
  text: string;
  kind?: "confirmation";
}

export interface TextDeltaMessage {
  type: "text.delta";
  turn: number;
  text: string;
}

export interface TextDoneMessage {
  type: "text.done";
  turn: number;
  text: string;
}

export interface TranscriptInputMessage {
  type: "transcript.input";
  turn: number;
  text: string;
}

export interface TranscriptOutputMessage {
  type: "transcript.output";
  turn: number;
  text: string;
}

export interface AudioInterruptedMessage {
  type: "audio.interrupted";
  turn: number;
}

/** Tool arguments after redaction: keys not allow-listed are "[redacted]". */
export type ToolArgs = Record<string, unknown>;

export interface ToolCallMessage {
  type: "tool.call";
  turn: number;
  id: string;
  name: string;
  /** Absent while the model's arguments still stream: tool.args follows. */
  args?: ToolArgs;
}

export interface ToolArgsMessage {
  type: "tool.args";
  turn: number;
  id: string;
  args: ToolArgs;
}

export interface ToolError {
  /** e.g. NOT_FOUND, MODE_RESTRICTED, BUDGET_EXCEEDED, LOOP_DETECTED, CONFIRMATION_REQUIRED, UNTRUSTED_CONTEXT, VALIDATION, TIMEOUT. */
  type: string;
  message: string;
}

export interface ToolResultMessage {
  type: "tool.result";
  turn: number;
  id: string;
  name: string;
  ok: boolean;
  /** True when the gateway's policy answered the call without running the tool. */
  refused: boolean;
  error?: ToolError;
  durationMs: number;
  /** The allow-listed fields of the tool's output. */
  result?: Record<string, unknown>;
}

export interface ConfirmRequestMessage {
  type: "confirm.request";
  turn?: number;
  token: string;
  tool: string;
  args: ToolArgs;
  /** RFC 3339. */
  expiresAt: string;
}

export interface ConfirmDoneMessage {
  type: "confirm.done";
  token: string;
  tool: string;
  outcome: "approved" | "denied" | "expired";
}

export interface ModeMessage {
  type: "mode";
  mode: Mode;
  /** session.start, resume, client, start_voice_session, end_voice_session, upstream_lost, … */
  reason: string;
  /** The tools of the new mode, as in session.ready (left out when the mode has none). */
  tools?: ToolInfo[];
}

export interface BlockedMessage {
  type: "blocked";
  /** RFC 3339. */
  until: string;
  reason?: string;
}

/** The model handed the conversation to a person (request_human); sent again after a resume (turn 0). */
export interface HandoffMessage {
  type: "handoff";
  turn: number;
  reason: string;
  /** The model's summary for the person taking over. */
  summary?: string;
  /** RFC 3339. */
  at: string;
}

/** Answers a text (or voice.start) while a person has the conversation: kept for the person, not sent to the model. */
export interface HandoffPendingMessage {
  type: "handoff.pending";
  message: string;
}

/** An operator handed the conversation back to the model. */
export interface HandoffEndedMessage {
  type: "handoff.ended";
}

export type TurnDoneReason = "end_turn" | "terminal_tool" | "finish" | "max_iterations" | "interrupted" | "error";

export interface TurnDoneMessage {
  type: "turn.done";
  turn: number;
  reason: TurnDoneReason;
  /** Intents the turn's tools returned that do not apply in the session's mode, with why. */
  ignoredIntents?: { type: string; reason: string }[];
}

export type ErrorCode =
  /** Client-side, terminal: attempts in a row never reached session.ready (see ClientOptions.maxFailedAttempts). */
  | "unreachable_or_refused"
  | "bad_json"
  | "unknown_type"
  | "bad_message"
  | "unsupported"
  | "turn_in_progress"
  | "rate_limited"
  | "unauthenticated"
  | "model_error"
  | "model_truncated"
  | "model_unavailable"
  | "model_refused"
  | "max_iterations"
  | "turn_cancelled"
  | "resume_refused"
  | "store_unavailable"
  | "draining"
  | "internal"
  | "blocked"
  | "confirmation_unknown"
  | "confirmation_expired"
  | "upstream_unavailable"
  | "upstream_closed"
  | "upstream_lost"
  /** The user's stored conversations reached their storage quota: the message was not accepted. */
  | "quota_exceeded"
  /** session.start asked for an assistant profile that does not exist or the token does not allow. */
  | "profile_refused";

export interface ErrorMessage {
  type: "error";
  code: ErrorCode | (string & {});
  message: string;
  retryable: boolean;
  turn?: number;
  /** unreachable_or_refused: how many attempts failed in a row. */
  attempts?: number;
}

export interface PongMessage {
  type: "pong";
}

/** Every server → client JSON message of protocol v1. */
export type ServerMessage =
  | SessionReadyMessage
  | AuthOkMessage
  | HistoryMessage
  | TurnStartMessage
  | TextDeltaMessage
  | TextDoneMessage
  | TranscriptInputMessage
  | TranscriptOutputMessage
  | AudioInterruptedMessage
  | ToolCallMessage
  | ToolArgsMessage
  | ToolResultMessage
  | ConfirmRequestMessage
  | ConfirmDoneMessage
  | ModeMessage
  | BlockedMessage
  | HandoffMessage
  | HandoffPendingMessage
  | HandoffEndedMessage
  | TurnDoneMessage
  | ErrorMessage
  | PongMessage;

/** A message of a type this client version does not know. */
export interface UnknownMessage {
  type: string;
  [field: string]: unknown;
}

/** Server messages by type. */
export type ServerMessages = { [M in ServerMessage as M["type"]]: M };

/** Client → server message types (what Client.send accepts). */
export type ClientMessageType =
  | "session.start"
  | "text"
  | "voice.start"
  | "voice.stop"
  | "audio.end"
  | "turn.cancel"
  | "confirm"
  | "auth"
  | "history"
  | "ping";

// ------------------------------------------------------------------ client

/** Returns the access token (a JWT) for the next connection or refresh,
 * e.g. from your backend. Throwing or rejecting stops the client. */
export type TokenSupplier = () => string | Promise<string>;

export type Status =
  | { state: "connecting" }
  | { state: "ready"; resumed: boolean }
  | {
      state: "reconnecting";
      attempt: number;
      delayMs: number;
      everConnected: boolean;
      /** connect() waits out the time a 4008 asked for (ClosedStatus.retryAfterMs). */
      cooldown?: boolean;
    }
  | ClosedStatus;

/** The client stopped and will not reconnect by itself (connect() starts it again). */
export interface ClosedStatus {
  state: "closed";
  /** server: a terminal close code; client: close(); token: the token supplier failed;
   * unreachable: attempts in a row never reached session.ready (an `error` with code unreachable_or_refused came first). */
  by: "server" | "client" | "token" | "unreachable";
  /** The close code (0 when the token supplier failed). */
  code: number;
  /** The gateway's close reason. */
  reason: string;
  /** A sentence for the user. */
  message: string;
  /** How long the gateway asked the client to wait before connecting again (a 4008 whose
   * reason ends "; retry after N s"); connect() and newSession() wait until then. */
  retryAfterMs?: number;
  /** What the token supplier threw. */
  error?: unknown;
}

export type StatusState = "idle" | Status["state"];

export type MicState = "off" | "starting" | "waiting" | "on";
export type PlaybackState = "idle" | "buffering" | "playing";

export interface VoiceState {
  mode: Mode | null;
  switching: Mode | null;
  mic: MicState;
  /** The microphone hands back its last frame. */
  stopping: boolean;
  blocked: boolean;
  playback: PlaybackState;
}

/** The speaker's progress; counts in 24 kHz samples. */
export interface PlaybackReport {
  state: PlaybackState;
  played: number;
  buffered: number;
  underruns: number;
  dropped: number;
  flushed: number;
}

export interface SwitchFailed {
  to: Mode;
  /** The gateway's error code, or "timeout" when it did not answer. */
  code: string;
  message: string;
}

/** Everything Client.on can listen for. */
export interface ClientEvents extends ServerMessages {
  /** Every server message, known or not. */
  message: ServerMessage | UnknownMessage;
  /** The model's speech: PCM16 little-endian mono 24 kHz; a copy the listeners may keep (the speaker has its own). */
  audio: ArrayBuffer;
  status: Status;
  voice: VoiceState;
  playback: PlaybackReport;
  switchFailed: SwitchFailed;
  /** The microphone or speaker failed; `message` is for the user. */
  audioError: { message: string };
  /** Speech arrived while the browser holds sound back until the user interacts: call voice.resumeAudio() from a click. */
  audioSuspended: Record<string, never>;
}

export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount: number;
  binaryType: string;
  // The client sets these; the events it reads are {data} and {code, reason}.
  onopen: ((ev: any) => any) | null;
  onmessage: ((ev: any) => any) | null;
  onclose: ((ev: any) => any) | null;
  onerror: ((ev: any) => any) | null;
  send(data: string | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** A JSON value, as `context` holds. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export interface ClientOptions {
  /** The gateway's WebSocket URL, e.g. "wss://gateway.example.com/v1/ws". */
  url: string;
  /** The access token, or (better) a supplier called on every (re)connect and before the token expires. Omit for a gateway in dev mode. */
  token?: string | TokenSupplier | null;
  /** How the token reaches the gateway: "subprotocol" (default: `turnstile.auth.<token>` beside turnstile.v1, kept out of
   * URLs and proxy logs) or "query" (`?access_token=`, for a gateway built before it took subprotocol tokens; proxies log it). */
  tokenIn?: "subprotocol" | "query";
  /** A client that has never been connected stops after this many attempts in a row that never reached session.ready
   * (refused Origin or token, gateway down), with an `error` event of code unreachable_or_refused (default 3). */
  maxFailedAttempts?: number;
  /** The mode a new session starts in (default "text"). */
  mode?: Mode;
  /** Page context a new session gives the model, labelled as untrusted (e.g. `{page: "/orders/1234"}`): a JSON object of at
   * most 2048 bytes, nested at most 4 deep; not sent on a resume (the session keeps its own). */
  context?: { [key: string]: JsonValue } | null;
  /** The assistant profile of a new session; the token's `profiles` claim must allow it (else error profile_refused, close 4002). */
  profile?: string | null;
  /** The Live voice of a new session (one of the gateway's TURNSTILE_LIVE_VOICES), e.g. "Puck". */
  voice?: string | null;
  /** The conversation's language (BCP-47, e.g. "de-DE"): the text model is told it, Live speaks it. */
  languageCode?: string | null;
  /** Where to keep the session for resuming after a reload (e.g. sessionStorage); default: memory only. */
  storage?: StorageLike | null;
  storageKey?: string;
  /** The WebSocket class (default: globalThis.WebSocket). */
  WebSocket?: WebSocketConstructor;
  /** Sound devices for voice (default: the browser's, browserAudio); false for none. */
  audio?: AudioDevicesFactory | false | null;
  /** Random numbers in [0, 1) for the backoff's jitter. */
  random?: () => number;
  backoff?: { minMs?: number; maxMs?: number };
  pingIntervalMs?: number;
  pongTimeoutMs?: number;
  /** How long before expiry the token is refreshed (default 60 s, at most half of what is left). */
  refreshMarginMs?: number;
  /** How long a voice.start/voice.stop may wait for its `mode` answer (default 15 s). */
  switchTimeoutMs?: number;
}

export interface HistoryPage {
  entries: HistoryEntry[];
  more: boolean;
}

export declare const SUBPROTOCOL: "turnstile.v1";
export declare const AUTH_SUBPROTOCOL_PREFIX: "turnstile.auth.";
export declare const MAX_FAILED_ATTEMPTS: number;
export declare const UNREACHABLE_OR_REFUSED: "unreachable_or_refused";
export declare const PING_INTERVAL_MS: number;
export declare const PONG_TIMEOUT_MS: number;
export declare const HISTORY_LIMIT_MAX: number;

/** Creates a Client and connects it. */
export declare function connect(options: ClientOptions): Client;

/** The gateway's WebSocket URL for a page served by the gateway itself. */
export declare function gatewayURL(loc: { protocol: string; host: string }): string;

export declare class Client {
  constructor(options: ClientOptions);
  /** "idle" before connect(), then the last Status state. */
  readonly status: StatusState;
  readonly ready: boolean;
  readonly sessionId: string | null;
  readonly mode: Mode | null;
  /** The highest turn number seen. */
  readonly turn: number;
  /** The oldest turn the client has history for, or null. */
  readonly oldestTurn: number | null;
  /** True when the gateway has older history than the client has seen. */
  readonly moreHistory: boolean;
  /** The current token's expiry (ms since the epoch), or null when unknown. */
  readonly tokenExpiresAt: number | null;
  readonly voice: Voice;

  /** Listens for an event; returns a function that stops listening. Only the events of ClientEvents: a message type this
   * version does not know arrives in "message". */
  on<K extends keyof ClientEvents>(type: K, fn: (event: ClientEvents[K]) => void): () => void;
  off<K extends keyof ClientEvents>(type: K, fn: (event: ClientEvents[K]) => void): void;

  connect(): void;
  /** Forgets the session and starts a new one. */
  newSession(): void;
  /** Skips the rest of a backoff wait. */
  retryNow(): void;
  /** Closes for good (until connect()); the session stays resumable. */
  close(): void;

  /** Sends a raw client message; false when nothing was sent. */
  send(type: ClientMessageType, fields?: Record<string, unknown>): boolean;
  /** Sends PCM16 16 kHz microphone audio (even byte count). */
  sendAudio(buffer: ArrayBuffer): boolean;
  /** Sends a user message (control characters removed, trimmed). */
  sendText(text: string): boolean;
  /** Answers a confirm.request. */
  confirm(token: string, approve: boolean): boolean;
  /** Cancels the running turn and silences queued speech. */
  cancelTurn(): boolean;
  /** voice.start(options). */
  startVoice(options?: { mic?: boolean }): Promise<boolean>;
  /** voice.stop(). */
  stopVoice(): Promise<boolean>;
  /** Older history: up to `limit` (≤ 100, default 50) entries before turn `before` (default: the oldest known). */
  loadHistory(options?: { before?: number; limit?: number }): Promise<HistoryPage>;
}

// ------------------------------------------------------------------- voice

export declare const MIC_OFF: "off";
export declare const MIC_STARTING: "starting";
export declare const MIC_WAITING: "waiting";
export declare const MIC_ON: "on";
export declare const SWITCH_TIMEOUT_MS: number;

/** A Client's voice: microphone, speaker and mode switches. */
export declare class Voice {
  readonly mode: Mode | null;
  readonly switching: Mode | null;
  readonly mic: MicState;
  readonly stopping: boolean;
  blocked: boolean;
  readonly framesSent: number;
  readonly bytesSent: number;
  readonly framesDropped: number;
  readonly audioEnds: number;
  readonly audioFramesReceived: number;
  readonly audioBytesReceived: number;
  readonly interruptions: number;
  readonly micSampleRate: number;
  readonly playback: PlaybackReport;
  snapshot(): VoiceState;
  /** Starts voice from a user gesture: the microphone (default) and the switch to voice. Rejects with a sentence for the user when the microphone cannot start. */
  start(options?: { mic?: boolean }): Promise<boolean>;
  /** Stops the microphone and asks for text mode. */
  stop(): Promise<boolean>;
  startMic(): Promise<boolean>;
  stopMic(): Promise<void>;
  /** Lets the browser play held-back sound; call from a click or key handler. */
  resumeAudio(): void;
  /** Drops queued speech. */
  silence(): void;
  blockUntil(until: number): void;
}

/** What a Client needs from sound devices (see browserAudio). */
export interface AudioDevices {
  microphone: {
    readonly active: boolean;
    readonly sampleRate: number;
    /** Starts capturing; frames go to the handlers' onFrame. */
    start(): Promise<void>;
    /** Stops; resolves to the last partial frame or null. */
    stop(): Promise<ArrayBuffer | null>;
  };
  speaker: {
    /** Queues PCM16 24 kHz speech. */
    push(buffer: ArrayBuffer): void;
    /** Drops all queued speech. */
    flush(): void;
  };
  resume(): void;
  readonly suspended: boolean;
  warmUp?(): Promise<unknown>;
}

export interface AudioHandlers {
  /** A microphone frame: PCM16 little-endian 16 kHz, 40 ms. */
  onFrame(frame: ArrayBuffer): void;
  onEnded(): void;
  onReport(report: PlaybackReport): void;
  onError(message: string): void;
}

export type AudioDevicesFactory = (handlers: AudioHandlers) => AudioDevices;

/** The browser's devices: getUserMedia into an AudioWorklet (16 kHz, anti-aliased) and a jitter-buffered AudioWorklet speaker. */
export declare const browserAudio: AudioDevicesFactory;

export declare class AudioEngine {
  readonly ctx: AudioContext | null;
  readonly suspended: boolean;
  context(): Promise<AudioContext>;
  resume(): void;
}

export declare class Microphone {
  constructor(engine: AudioEngine, handlers: Pick<AudioHandlers, "onFrame" | "onEnded">);
  readonly active: boolean;
  readonly sampleRate: number;
  start(): Promise<void>;
  stop(): Promise<ArrayBuffer | null>;
}

export declare class Speaker {
  constructor(engine: AudioEngine, handlers: Pick<AudioHandlers, "onReport" | "onError">);
  push(buffer: ArrayBuffer): void;
  flush(): void;
}

// ------------------------------------------------------------------- audio

export declare const MIC_RATE: 16000;
export declare const PLAYBACK_RATE: 24000;
export declare const FRAME_SAMPLES: 640;
export declare const FRAME_BYTES: 1280;
export declare function downmix(channels: Float32Array[]): Float32Array;
export declare function toPCM16(sample: number): number;
export declare function pcm16ToFloat(bytes: ArrayBuffer | ArrayBufferView): Float32Array;
export declare function lowPass(taps: number, cutoff: number): Float32Array;

/** Streaming conversion down to 16 kHz with a windowed-sinc anti-alias low-pass. */
export declare class Downsampler {
  constructor(inRate: number, outRate?: number);
  process(input: Float32Array): Float32Array;
}

/** Cuts float samples into PCM16 LE frames of exactly frameSamples samples. */
export declare class FrameAssembler {
  constructor(frameSamples?: number);
  readonly frameSamples: number;
  push(samples: Float32Array): ArrayBuffer[];
  flush(): ArrayBuffer | null;
}

export declare const IDLE: "idle";
export declare const BUFFERING: "buffering";
export declare const PLAYING: "playing";

/** The jitter buffer in front of the speaker. */
export declare class PlaybackQueue {
  constructor(options: { inRate?: number; outRate: number; startMs?: number; maxSeconds?: number });
  readonly state: PlaybackState;
  readonly buffered: number;
  readonly played: number;
  readonly dropped: number;
  readonly flushed: number;
  readonly underruns: number;
  readonly startSamples: number;
  readonly maxSamples: number;
  push(samples: Float32Array): number;
  flush(): number;
  render(out: Float32Array): void;
}

// ----------------------------------------------------------------- helpers

/** Each turn's user and model texts, from pieces in any order. */
export declare class TurnTexts {
  start(turn: number, text: string): void;
  input(turn: number, piece: string): void;
  output(turn: number, piece: string): void;
  delta(turn: number, piece: string): void;
  done(turn: number, text: string): void;
  user(turn: number): string;
  model(turn: number): { text: string; final: boolean };
  spoken(turn: number): boolean;
  clear(): void;
}

export interface ConfirmItem {
  token: string;
  tool: string;
  args: ToolArgs;
  turn: number | null;
  /** ms since the epoch. */
  expiresAt: number;
  receivedAt: number;
  /** The answer went out; waiting for confirm.done. */
  sent: boolean;
}

export declare function parseRequest(msg: unknown, now?: number): ConfirmItem | null;

/** Pending confirmations, oldest first, each answered at most once. */
export declare class ConfirmQueue {
  constructor(options?: { now?: () => number; onChange?: () => void });
  readonly current: ConfirmItem | null;
  readonly items: ConfirmItem[];
  readonly length: number;
  add(msg: unknown): "added" | "duplicate" | "expired" | "invalid";
  replace(list: unknown): ConfirmItem[];
  answer(token: string, approve: boolean): { token: string; approve: boolean } | null;
  unsend(token: string): void;
  settle(token: string): ConfirmItem | null;
  dropSent(): ConfirmItem[];
  expire(): ConfirmItem[];
  nextExpiryIn(): number | null;
  clear(): void;
}

export declare const BACKOFF_MIN_MS: number;
export declare const BACKOFF_MAX_MS: number;
export declare function backoffDelay(attempt: number, random?: () => number, options?: { minMs?: number; maxMs?: number }): number;
export declare function closeAction(code: number): "reconnect" | "reauth" | "restart" | "stop";
export declare function describeClose(code: number): string;
/** The wait (ms) a close reason ending "; retry after N s" asks for, or null. */
export declare function retryAfterMs(reason: string): number | null;
export declare function tokenExpiry(token: string): number | null;
export declare function refreshDelay(expiresAt: number | null, now?: number, marginMs?: number): number | null;
