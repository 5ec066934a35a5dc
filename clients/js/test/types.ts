// Type test: uses every public API of the package the way an application
// would, so that `tsc --noEmit` checks index.d.ts and react.d.ts against real
// use. Never run; the @ts-expect-error lines must stay errors.

import {
  AudioEngine, BACKOFF_MAX_MS, BACKOFF_MIN_MS, BUFFERING, Client, ConfirmQueue, Downsampler, FRAME_BYTES, FRAME_SAMPLES,
  FrameAssembler, HISTORY_LIMIT_MAX, IDLE, MIC_OFF, MIC_ON, MIC_RATE, MIC_STARTING, MIC_WAITING, Microphone, PING_INTERVAL_MS,
  PLAYBACK_RATE, PLAYING, PONG_TIMEOUT_MS, AUTH_SUBPROTOCOL_PREFIX, MAX_FAILED_ATTEMPTS, UNREACHABLE_OR_REFUSED, PlaybackQueue, SUBPROTOCOL, SWITCH_TIMEOUT_MS, Speaker, TurnTexts, backoffDelay,
  browserAudio, closeAction, connect, describeClose, retryAfterMs, downmix, gatewayURL, lowPass, parseRequest, pcm16ToFloat, refreshDelay,
  toPCM16, tokenExpiry,
} from "@turnstile-gw/client";
import type {
  AudioDevices, AudioDevicesFactory, ClientEvents, ClosedStatus, ConfirmItem, HistoryPage, JsonValue, Mode, ServerMessage, Status,
  ToolInfo, VoiceState,
} from "@turnstile-gw/client";
import { useTurnstile } from "@turnstile-gw/client/react";
import type { TurnstileState } from "@turnstile-gw/client/react";

async function fetchToken(): Promise<string> {
  const res = await fetch("/api/turnstile-token", { method: "POST" });
  return ((await res.json()) as { token: string }).token;
}

const pageContext: { [key: string]: JsonValue } = { page: "/orders/1234", cart: { items: 2, express: true }, tags: ["vip", null] };

export async function app(): Promise<void> {
  const client: Client = connect({
    url: "wss://gateway.example.com/v1/ws",
    token: fetchToken,
    mode: "text",
    storage: sessionStorage,
    storageKey: "chat",
    backoff: { minMs: 500, maxMs: 10_000 },
    refreshMarginMs: 30_000,
    tokenIn: "subprotocol",
    maxFailedAttempts: 5,
    context: pageContext,
    profile: "support",
    voice: "Puck",
    languageCode: "de-DE",
  });
  // @ts-expect-error: context is a JSON object, not a string
  connect({ url: "wss://gateway.example.com/v1/ws", context: "page=/orders/1234" });
  // @ts-expect-error: a function is not JSON
  connect({ url: "wss://gateway.example.com/v1/ws", context: { page: () => "/orders" } });
  const off = client.on("text.delta", (m) => console.log(m.turn, m.text.toUpperCase()));
  off();
  client.on("session.ready", (m) => {
    const tools: ToolInfo[] = m.tools ?? [];
    console.log(m.sessionId, m.mode satisfies Mode, m.historyTruncated === true, tools.map((t) => t.name + t.modes.join()));
    for (const e of m.history ?? []) console.log(e.role, e.text, e.turn, e.kind);
  });
  client.on("tool.call", (m) => console.log(m.id, m.name, m.args?.["query"]));
  client.on("tool.args", (m) => console.log(m.id, m.args));
  client.on("tool.result", (m) => console.log(m.ok, m.refused, m.error?.type, m.durationMs, m.result));
  client.on("confirm.request", (m) => client.confirm(m.token, window.confirm(`Allow ${m.tool}?`)));
  client.on("confirm.done", (m) => console.log(m.outcome === "approved"));
  client.on("auth.ok", (m) => console.log(Date.parse(m.expiresAt)));
  client.on("history", (m) => console.log(m.entries.length, m.more));
  client.on("turn.start", (m) => console.log(m.kind));
  client.on("text.done", (m) => console.log(m.text));
  client.on("transcript.input", (m) => console.log(m.text));
  client.on("transcript.output", (m) => console.log(m.text));
  client.on("audio.interrupted", (m) => console.log(m.turn));
  client.on("mode", (m) => console.log(m.mode, m.reason));
  client.on("blocked", (m) => console.log(m.until, m.reason));
  client.on("handoff", (m) => console.log(m.reason, m.summary, m.at, m.turn));
  client.on("handoff.pending", (m) => console.log(m.message));
  client.on("handoff.ended", (m) => console.log(m.type));
  client.on("turn.done", (m) => console.log(m.reason === "interrupted"));
  client.on("error", (m) => console.log(m.code === "rate_limited", m.retryable, m.turn));
  client.on("pong", () => {});
  client.on("message", (m) => console.log(m.type));
  client.on("audio", (buf) => console.log(buf.byteLength));
  client.on("status", (s: Status) => {
    if (s.state === "closed") console.log(s.by, s.code, s.reason, s.message, s.error);
    if (s.state === "reconnecting") console.log(s.attempt, s.delayMs, s.everConnected);
    if (s.state === "ready") console.log(s.resumed);
  });
  client.on("voice", (v: VoiceState) => console.log(v.mic, v.mode, v.switching, v.playback, v.blocked, v.stopping));
  client.on("playback", (p) => console.log(p.state, p.played, p.underruns));
  client.on("switchFailed", (f) => console.log(f.to, f.code, f.message));
  client.on("audioError", (e) => console.log(e.message));
  client.on("audioSuspended", () => client.voice.resumeAudio());
  client.on("message", (m) => console.log(m.type, (m as Record<string, unknown>)["anything"]));
  // @ts-expect-error: a misspelt event name (no string fallback: a typo fails tsc)
  client.on("text.detla", () => {});
  // @ts-expect-error: a misspelt event name in off too
  client.off("sesion.ready", () => {});
  client.on("error", (m) => console.log(m.code === "unreachable_or_refused", m.attempts));
  // @ts-expect-error: text.delta has no `args`
  client.on("text.delta", (m) => m.args);
  // @ts-expect-error: not a client message type
  client.send("session.ready");

  client.sendText("How long does shipping take?");
  client.send("ping");
  client.sendAudio(new ArrayBuffer(FRAME_BYTES));
  client.cancelTurn();
  await client.startVoice();
  await client.startVoice({ mic: false });
  await client.stopVoice();
  const page: HistoryPage = await client.loadHistory({ limit: HISTORY_LIMIT_MAX });
  await client.loadHistory({ before: client.oldestTurn ?? 1 });
  console.log(page.entries, client.moreHistory, client.status, client.ready, client.sessionId, client.mode, client.turn, client.tokenExpiresAt);
  const v = client.voice;
  await v.start();
  await v.startMic();
  await v.stopMic();
  await v.stop();
  v.silence();
  v.blocked = false;
  v.blockUntil(Date.now() + 1000);
  const snap: VoiceState = v.snapshot();
  console.log(snap, v.framesSent, v.bytesSent, v.framesDropped, v.audioEnds, v.audioFramesReceived, v.audioBytesReceived, v.interruptions, v.micSampleRate, v.playback.state, v.mic === MIC_ON || v.mic === MIC_OFF || v.mic === MIC_STARTING || v.mic === MIC_WAITING);
  client.retryNow();
  client.newSession();
  client.close();
  client.connect();

  const quiet = new Client({ url: gatewayURL(location), token: "static-token", audio: false, WebSocket });
  quiet.connect();

  const custom: AudioDevicesFactory = (h) => {
    const devices: AudioDevices = {
      microphone: { active: false, sampleRate: 48_000, start: async () => h.onFrame(new ArrayBuffer(2)), stop: async () => null },
      speaker: { push: () => h.onReport({ state: IDLE, played: 0, buffered: 0, underruns: 0, dropped: 0, flushed: 0 }), flush: () => h.onError("x") },
      resume: () => h.onEnded(),
      suspended: false,
    };
    return devices;
  };
  connect({ url: "ws://127.0.0.1:8080/v1/ws", audio: custom, WebSocket, random: Math.random, pingIntervalMs: PING_INTERVAL_MS, pongTimeoutMs: PONG_TIMEOUT_MS, switchTimeoutMs: SWITCH_TIMEOUT_MS });
  connect({ url: "ws://x", audio: browserAudio });

  const engine = new AudioEngine();
  const ctx: AudioContext = await engine.context();
  engine.resume();
  const mic = new Microphone(engine, { onFrame: (f) => f.byteLength, onEnded: () => {} });
  await mic.start();
  const tail: ArrayBuffer | null = await mic.stop();
  const speaker = new Speaker(engine, { onReport: (r) => r.state, onError: (m) => m });
  speaker.push(new ArrayBuffer(960));
  speaker.flush();
  console.log(ctx.sampleRate, tail, mic.active, mic.sampleRate, engine.suspended, engine.ctx);

  const down = new Downsampler(48_000, MIC_RATE);
  const frames = new FrameAssembler(FRAME_SAMPLES);
  for (const f of frames.push(down.process(downmix([new Float32Array(128)])))) client.sendAudio(f);
  console.log(frames.flush(), frames.frameSamples, toPCM16(0.5), pcm16ToFloat(new ArrayBuffer(4)), lowPass(49, 0.15));
  const q = new PlaybackQueue({ inRate: PLAYBACK_RATE, outRate: 48_000, startMs: 150, maxSeconds: 120 });
  q.push(pcm16ToFloat(new Uint8Array(4)));
  q.render(new Float32Array(128));
  console.log(q.flush(), q.state === BUFFERING || q.state === PLAYING, q.buffered, q.played, q.dropped, q.flushed, q.underruns, q.startSamples, q.maxSamples);

  const texts = new TurnTexts();
  texts.start(1, "hi");
  texts.input(1, "hi");
  texts.output(1, "hello");
  texts.delta(1, "hel");
  texts.done(1, "hello");
  console.log(texts.user(1), texts.model(1).final, texts.spoken(1));
  texts.clear();

  const confirms = new ConfirmQueue({ now: Date.now, onChange: () => {} });
  confirms.add({ type: "confirm.request", token: "t", tool: "x", args: {}, expiresAt: new Date().toISOString() });
  const head: ConfirmItem | null = confirms.current;
  const answer = confirms.answer("t", true);
  if (answer) client.confirm(answer.token, answer.approve);
  confirms.unsend("t");
  console.log(head, confirms.items, confirms.length, confirms.settle("t"), confirms.dropSent(), confirms.expire(), confirms.nextExpiryIn(), confirms.replace([]), parseRequest({}));
  confirms.clear();

  console.log(AUTH_SUBPROTOCOL_PREFIX, MAX_FAILED_ATTEMPTS, UNREACHABLE_OR_REFUSED);
  console.log(SUBPROTOCOL, BACKOFF_MIN_MS, BACKOFF_MAX_MS, backoffDelay(3, Math.random, { maxMs: 5000 }), closeAction(4001) === "reauth",
    describeClose(4008), tokenExpiry("a.b.c"), refreshDelay(Date.now() + 60_000, Date.now(), 10_000));
  const closed: ClosedStatus | null = null;
  const wait: number | null = retryAfterMs("rate limits exceeded for too long; retry after 60 s");
  client.on("status", (s) => {
    if (s.state === "closed" && s.retryAfterMs !== undefined) console.log(s.retryAfterMs + (wait ?? 0));
    if (s.state === "reconnecting" && s.cooldown === true) console.log(s.delayMs);
  });
  const events: (keyof ClientEvents)[] = ["status", "audio", "tool.args"];
  const m: ServerMessage = { type: "pong" };
  console.log(closed, events, m);
}

export function ChatStatus(): string {
  const t: TurnstileState = useTurnstile({ url: "wss://gateway.example.com/v1/ws", token: () => fetchToken(), enabled: true });
  if (t.closed) return t.closed.message;
  t.client?.sendText("hi");
  return `${t.status} ${t.ready} ${t.sessionId} ${t.mode} ${t.turn} ${t.busy} ${t.voice.mic}`;
}
