// The connection against a real WebSocket server playing the gateway:
// session start and resume, close codes, backoff, events, text and history.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client, backoffDelay, closeAction, connect, describeClose, retryAfterMs } from "../index.js";
import { ClientWebSocket, record, until, useGateway } from "./gateway.js";

const { gw, clients } = useGateway();

function open(options = {}) {
  const client = connect({
    url: gw.url,
    WebSocket: ClientWebSocket,
    audio: false,
    backoff: { minMs: 20, maxMs: 100 },
    ...options,
  });
  clients.push(client);
  return client;
}

test("connects with the subprotocol, starts a session and reports it ready", async () => {
  const client = open({ mode: "voice" });
  const log = record(client, "status", "session.ready");
  const peer = await gw.peer();
  assert.equal(peer.protocol, "turnstile.v1");
  assert.equal(peer.token, null, "no token supplier: no access_token");
  assert.deepEqual(await peer.next(), { type: "session.start", mode: "voice" });
  peer.ready({ mode: "text", turn: 3 });
  await until("ready", () => client.ready);
  assert.deepEqual(log.map(([t, p]) => (t === "status" ? p.state : t)), ["connecting", "ready", "session.ready"]);
  assert.equal(client.sessionId, "s1");
  assert.equal(client.mode, "text");
  assert.equal(client.turn, 3);
  assert.equal(client.status, "ready");
});

test("resumes the session after a reconnect close code, with a fresh token each time", async () => {
  let calls = 0;
  const client = open({ token: async () => `tok-${++calls}` });
  const states = [];
  client.on("status", (s) => states.push(s.state));
  const first = await gw.peer();
  assert.equal(first.token, "tok-1");
  assert.equal(first.tokenVia, "subprotocol", "the token rides in the subprotocol list, not the URL");
  assert.equal(first.protocol, "turnstile.v1", "the gateway answers turnstile.v1 only");
  assert.deepEqual(await first.next(), { type: "session.start" });
  first.ready();
  await until("ready", () => client.ready);
  first.close(4100, "draining");

  const second = await gw.peer();
  assert.equal(second.token, "tok-2", "the supplier is asked again on reconnect");
  assert.deepEqual(await second.next(), { type: "session.start", resume: { sessionId: "s1", resumeToken: "t1" } });
  second.ready({ resumed: true });
  await until("ready again", () => client.ready);
  assert.deepEqual(states, ["connecting", "ready", "reconnecting", "reconnecting", "ready"]);
});

test("a new session asks for its context, profile, voice and language; a resume does not", async () => {
  const context = { page: "/orders/1234", cart: { items: 2 } };
  const client = open({ context, profile: "support", voice: "Puck", languageCode: "de-DE", mode: "voice" });
  const first = await gw.peer();
  assert.deepEqual(await first.next(), {
    type: "session.start", mode: "voice", context, profile: "support", voice: "Puck", languageCode: "de-DE",
  });
  first.ready();
  await until("ready", () => client.ready);
  first.close(4100, "draining");
  const second = await gw.peer();
  assert.deepEqual(await second.next(), { type: "session.start", resume: { sessionId: "s1", resumeToken: "t1" } },
    "the resumed session keeps what it started with");
});

test("refuses start options of the wrong type before connecting", () => {
  for (const [opts, want] of [
    [{ context: "page=/orders" }, /context must be a plain object/],
    [{ context: ["a"] }, /context must be a plain object/],
    [{ profile: 7 }, /profile must be a non-empty string/],
    [{ voice: "" }, /voice must be a non-empty string/],
    [{ languageCode: {} }, /languageCode must be a non-empty string/],
  ]) {
    assert.throws(() => new Client({ url: gw.url, WebSocket: ClientWebSocket, audio: false, ...opts }), want);
  }
});

test("starts over without resume when the resume is refused (4004)", async () => {
  const storage = new Map();
  const store = { getItem: (k) => storage.get(k) ?? null, setItem: (k, v) => storage.set(k, v), removeItem: (k) => storage.delete(k) };
  store.setItem("turnstile.session", JSON.stringify({ sessionId: "old", resumeToken: "gone" }));
  const client = open({ storage: store });
  const first = await gw.peer();
  assert.deepEqual(await first.next(), { type: "session.start", resume: { sessionId: "old", resumeToken: "gone" } });
  first.send({ type: "error", code: "resume_refused", message: "cannot resume", retryable: false });
  first.close(4004, "resume refused");
  const second = await gw.peer();
  assert.deepEqual(await second.next(), { type: "session.start" });
  second.ready({ sessionId: "s2", resumeToken: "t2" });
  await until("ready", () => client.ready);
  assert.equal(store.getItem("turnstile.session"), `{"sessionId":"s2","resumeToken":"t2"}`);
});

for (const [code, reason] of [[4005, "resumed elsewhere"], [4008, "rate abuse"], [4002, "protocol"]]) {
  test(`stops for good on close ${code}, with the gateway's reason and a sentence`, async () => {
    const client = open();
    const peer = await gw.peer();
    await peer.next();
    peer.ready();
    await until("ready", () => client.ready);
    const closed = new Promise((resolve) => client.on("status", (s) => s.state === "closed" && resolve(s)));
    peer.close(code, reason);
    const s = await closed;
    assert.deepEqual(s, { state: "closed", by: "server", code, reason, message: describeClose(code) });
    assert.equal(await gw.peer(300).catch(() => null), null, "no reconnect after a terminal close");
  });
}

// A client with a session ready, and the gateway's side of it.
async function openReady(options) {
  const client = open(options);
  const peer = await gw.peer();
  await peer.next();
  peer.ready();
  await until("ready", () => client.ready);
  return { client, peer };
}

test("a 4008 that says when to retry keeps connect() and newSession() waiting until then", async () => {
  const { client, peer } = await openReady();
  const closed = new Promise((resolve) => client.on("status", (s) => s.state === "closed" && resolve(s)));
  peer.close(4008, "rate limits exceeded for too long; retry after 60 s");
  const s = await closed;
  assert.equal(s.by, "server");
  assert.equal(s.code, 4008);
  assert.equal(s.retryAfterMs, 60_000);
  assert.match(s.message, /Try again in 60 s\.$/);
  assert.equal(await gw.peer(300).catch(() => null), null, "no reconnect after a 4008");

  // The app asks to connect again at once (a button, a new session): the
  // client waits out the cooldown instead of being refused by the gateway.
  const waiting = new Promise((resolve) => client.on("status", (st) => st.state === "reconnecting" && resolve(st)));
  client.newSession();
  const w = await waiting;
  assert.equal(w.cooldown, true);
  assert.ok(w.delayMs > 0 && w.delayMs <= 60_000, `waits ${w.delayMs} ms`);
  client.retryNow();
  assert.equal(await gw.peer(300).catch(() => null), null, "no connection during the cooldown, retryNow() or not");
  client.close();
});

test("after the wait a 4008 asked for, connect() goes through", async () => {
  const { client, peer } = await openReady();
  peer.close(4008, "too many new sessions: try again later; retry after 1 s");
  await until("closed", () => client.status === "closed");
  client.connect();
  const next = await gw.peer();
  assert.equal((await next.next()).resume.sessionId, "s1", "the session is resumed after the wait");
});

test("retryAfterMs reads the wait at the end of a close reason only", () => {
  assert.equal(retryAfterMs("rate limits exceeded for too long; retry after 120 s"), 120_000);
  assert.equal(retryAfterMs("rate limits exceeded for too long"), null);
  assert.equal(retryAfterMs("; retry after 5 s, or not"), null);
  assert.equal(retryAfterMs(undefined), null);
});

test("reconnects and resumes after the idle close (4104)", async () => {
  const client = open();
  const first = await gw.peer();
  await first.next();
  first.ready();
  await until("ready", () => client.ready);
  first.close(4104, "idle");
  const second = await gw.peer();
  assert.equal((await second.next()).resume.sessionId, "s1");
});

test("tokenIn: query puts the token in ?access_token= for an older gateway", async () => {
  const client = open({ token: "tok-q", tokenIn: "query" });
  const peer = await gw.peer();
  assert.equal(peer.token, "tok-q");
  assert.equal(peer.tokenVia, "query");
  assert.equal(peer.protocol, "turnstile.v1");
  client.close();
});

test("a 4001 gets a fresh token and one resume; a second 4001 is final", async () => {
  let calls = 0;
  const client = open({ token: () => `tok-${++calls}` });
  const first = await gw.peer();
  await first.next();
  first.ready();
  await until("ready", () => client.ready);
  first.send({ type: "error", code: "unauthenticated", message: "token expired", retryable: false });
  first.close(4001, "token expired");

  const second = await gw.peer();
  assert.equal(second.token, "tok-2");
  assert.equal((await second.next()).resume.sessionId, "s1", "the session is resumed with the new token");
  const closed = new Promise((resolve) => client.on("status", (s) => s.state === "closed" && resolve(s)));
  second.close(4001, "still not valid");
  const s = await closed;
  assert.equal(s.code, 4001);
  assert.equal(s.by, "server");
  assert.equal(await gw.peer(300).catch(() => null), null, "no third try");
  assert.equal(calls, 2);
});

test("the close codes of docs/protocol.md are followed", () => {
  const doc = readFileSync(new URL("../../../docs/protocol.md", import.meta.url), "utf8");
  const section = doc.split("## Close codes")[1].split("\n## ")[0];
  const rows = [...section.matchAll(/^\| (\d{4}) \| (\w+) \|/gm)].map((m) => [Number(m[1]), m[2]]);
  assert.ok(rows.length >= 10, `found ${rows.length} close codes in the doc`);
  for (const [code, kind] of rows) {
    const want = code === 4001 ? "reauth" : code === 4004 ? "restart" : kind === "reconnect" ? "reconnect" : "stop";
    assert.equal(closeAction(code), want, `close ${code} (${kind})`);
  }
  assert.ok(rows.some(([c]) => c === 4008) && rows.some(([c]) => c === 4104), "4008 and 4104 are documented");
  // Undocumented codes follow the ranges; network failures reconnect.
  for (const [code, want] of [[4003, "stop"], [4099, "stop"], [4102, "reconnect"], [4199, "reconnect"], [1001, "reconnect"], [1006, "reconnect"], [1011, "reconnect"]]) {
    assert.equal(closeAction(code), want, `close ${code}`);
  }
});

test("backoff doubles from half a second to ten, with jitter below", () => {
  const ceilings = [500, 1000, 2000, 4000, 8000, 10000, 10000, 10000];
  ceilings.forEach((ceiling, attempt) => {
    const low = backoffDelay(attempt, () => 0);
    const high = backoffDelay(attempt, () => 0.999999);
    assert.equal(high, ceiling);
    assert.ok(low < high && low >= ceiling * 0.6, `attempt ${attempt}: ${low}..${high}`);
  });
});

test("reconnect attempts wait longer and longer while the gateway cannot be reached", async () => {
  // A gateway that refuses the upgrade: the browser sees close 1006, as for
  // a dead network.
  const client = open({ url: "ws://127.0.0.1:9/v1/ws", backoff: { minMs: 10, maxMs: 40 }, random: () => 1, maxFailedAttempts: Infinity });
  const delays = [];
  client.on("status", (s) => s.state === "reconnecting" && s.delayMs > 0 && delays.push(s.delayMs));
  await until("four attempts", () => delays.length >= 4);
  client.close();
  assert.deepEqual(delays.slice(0, 4), [10, 20, 40, 40]);
});

test("a client that never reaches session.ready stops after three attempts and says why", async () => {
  let minted = 0;
  const client = open({ url: "ws://127.0.0.1:9/v1/ws", backoff: { minMs: 1, maxMs: 2 }, token: () => `tok-${++minted}` });
  const log = record(client, "error", "status");
  await until("the client to stop", () => client.status === "closed");
  const errors = log.filter(([t]) => t === "error").map(([, e]) => e);
  assert.equal(errors.length, 1, "one terminal error");
  assert.equal(errors[0].code, "unreachable_or_refused");
  assert.equal(errors[0].retryable, false);
  assert.equal(errors[0].attempts, 3);
  for (const cause of ["Origin", "token", "down"]) assert.match(errors[0].message, new RegExp(cause));
  const last = log.at(-1)[1];
  assert.equal(last.state, "closed");
  assert.equal(last.by, "unreachable");
  assert.equal(minted, 3, "one token per attempt, none after the client stopped");
  await new Promise((r) => setTimeout(r, 50)); // a retry timer left behind would fire by now
  assert.equal(minted, 3);
  assert.equal(client.status, "closed");
});

test("a client that was connected keeps retrying past the limit (a restart, a network drop)", async () => {
  const client = open({ backoff: { minMs: 1, maxMs: 2 }, maxFailedAttempts: 2 });
  const peer = await gw.peer();
  await peer.next();
  peer.ready();
  await until("ready", () => client.ready);
  await gw.close(); // the gateway goes away: every attempt fails with 1006
  const attempts = [];
  client.on("status", (s) => s.state === "reconnecting" && s.delayMs > 0 && attempts.push(s.attempt));
  await until("five failed attempts", () => attempts.length >= 5);
  assert.notEqual(client.status, "closed");
  client.close();
});

test("every server message is an event of its type and a message event, in order", async () => {
  const client = open();
  const log = record(client, "message", "turn.start", "tool.call", "tool.args", "tool.result", "history", "some.future.type", "audio");
  const peer = await gw.peer();
  await peer.next();
  peer.ready({ tools: [{ name: "kb_search", modes: ["text", "voice"], requiresConfirmation: false, terminal: false }] });
  await until("ready", () => client.ready);
  peer.send({ type: "turn.start", turn: 1, text: "hi" });
  peer.send({ type: "tool.call", turn: 1, id: "c1", name: "kb_search" });
  peer.send({ type: "tool.args", turn: 1, id: "c1", args: { query: "hi" } });
  peer.send({ type: "tool.result", turn: 1, id: "c1", name: "kb_search", ok: true, refused: false, durationMs: 3, result: { count: 2 } });
  peer.send({ type: "some.future.type", x: 1 });
  peer.sendBinary(Buffer.alloc(480));
  peer.send({ type: "turn.done", turn: 1, reason: "end_turn" });
  await until("turn.done", () => log.some(([, p]) => p?.type === "turn.done"));
  const typed = log.filter(([t]) => t !== "message").map(([t, p]) => (t === "audio" ? `audio:${p.byteLength}` : `${t}:${JSON.stringify(p.args ?? p.result ?? null)}`));
  assert.deepEqual(typed, ['turn.start:null', 'tool.call:null', 'tool.args:{"query":"hi"}', 'tool.result:{"count":2}', "some.future.type:null", "audio:480"]);
  assert.deepEqual(log.filter(([t]) => t === "message").map(([, p]) => p.type),
    ["session.ready", "turn.start", "tool.call", "tool.args", "tool.result", "some.future.type", "turn.done"]);
  assert.equal(client.turn, 1);
});

test("a throwing listener does not break the connection", async () => {
  const client = open();
  const seen = [];
  const origError = console.error;
  const saved = globalThis.reportError;
  globalThis.reportError = () => {};
  try {
    client.on("session.ready", () => {
      throw new Error("listener bug");
    });
    client.on("session.ready", (m) => seen.push(m.sessionId));
    const peer = await gw.peer();
    await peer.next();
    peer.ready();
    await until("the second listener", () => seen.length === 1);
    assert.ok(client.ready);
  } finally {
    globalThis.reportError = saved;
    console.error = origError;
  }
});

test("text goes out without control characters, only once a session is ready", async () => {
  const client = open();
  assert.equal(client.sendText("too early"), false);
  const peer = await gw.peer();
  await peer.next();
  peer.ready();
  await until("ready", () => client.ready);
  assert.equal(client.sendText("  \u0007"), false, "nothing left to send");
  assert.equal(client.sendText(" How\u0000 long\tdoes\nshipping take? "), true);
  assert.deepEqual(await peer.next(), { type: "text", text: "How long\tdoes\nshipping take?" });
  assert.equal(client.confirm("ct1", "yes"), true);
  assert.deepEqual(await peer.next(), { type: "confirm", token: "ct1", approve: false });
  assert.equal(client.cancelTurn(), true);
  assert.deepEqual(await peer.next(), { type: "turn.cancel" });
});

test("older history is asked for before the oldest turn and arrives oldest first", async () => {
  const client = open();
  const peer = await gw.peer();
  await peer.next();
  peer.ready({
    resumed: true, turn: 12, historyTruncated: true,
    history: [{ role: "user", text: "q11", turn: 11 }, { role: "model", text: "a11", turn: 11 }, { role: "user", text: "q12", turn: 12 }],
  });
  await until("ready", () => client.ready);
  assert.equal(client.oldestTurn, 11);
  assert.equal(client.moreHistory, true);

  const page = client.loadHistory({ limit: 500 });
  assert.deepEqual(await peer.next(), { type: "history", before: 11, limit: 100 });
  const entries = [{ role: "user", text: "q9", turn: 9 }, { role: "model", text: "a9", turn: 9 }, { role: "user", text: "yes", turn: 10, kind: "confirmation" }];
  peer.send({ type: "history", entries, more: false });
  assert.deepEqual(await page, { entries, more: false });
  assert.equal(client.oldestTurn, 9);
  assert.equal(client.moreHistory, false);

  const lost = client.loadHistory();
  assert.deepEqual(await peer.next(), { type: "history", before: 9, limit: 50 });
  peer.close(4100, "draining");
  await assert.rejects(lost, /connection dropped/);
});

test("a dead link (a ping without answer) is noticed and the session resumed", async () => {
  const client = open({ pingIntervalMs: 20, pongTimeoutMs: 50 });
  const first = await gw.peer();
  await first.next();
  first.ready();
  await until("ready", () => client.ready);
  assert.deepEqual(await first.next(), { type: "ping" });
  // No pong: the client gives the socket up and resumes on a new one.
  const second = await gw.peer();
  assert.equal((await second.next()).resume.sessionId, "s1");
  assert.ok((await first.closed).code === 1000);
});

test("close() stops reconnecting and says so", async () => {
  const client = open();
  const peer = await gw.peer();
  await peer.next();
  peer.ready();
  await until("ready", () => client.ready);
  const log = record(client, "status");
  client.close();
  assert.equal((await peer.closed).code, 1000);
  assert.deepEqual(log, [["status", { state: "closed", by: "client", code: 1000, reason: "", message: "Disconnected." }]]);
  assert.equal(await gw.peer(200).catch(() => null), null);
});

test("the constructor refuses what cannot work", () => {
  assert.throws(() => new Client({ url: "" }), /url/);
  assert.throws(() => new Client({ url: "ws://x", token: 42 }), /token/);
  assert.throws(() => new Client({ url: "ws://x", tokenIn: "header" }), /tokenIn/);
  assert.throws(() => new Client({ url: "ws://x", WebSocket: null }), /WebSocket/);
});
