// The token supplier: asked on every connect, asked again before the token
// expires (the new token goes out in an `auth` message), and a supplier
// that fails stops the client with a clear reason instead of reconnecting
// forever.

import assert from "node:assert/strict";
import { test } from "node:test";

import { connect, refreshDelay, tokenExpiry } from "../index.js";
import { ClientWebSocket, jwt, until, useGateway } from "./gateway.js";

const { gw, clients } = useGateway();

function open(options) {
  const client = connect({ url: gw.url, WebSocket: ClientWebSocket, audio: false, backoff: { minMs: 20, maxMs: 100 }, ...options });
  clients.push(client);
  return client;
}

function closedStatus(client) {
  return new Promise((resolve) => client.on("status", (s) => s.state === "closed" && resolve(s)));
}

const inSeconds = (s) => Math.floor(Date.now() / 1000) + s;

test("the expiry is read from the JWT payload without verifying it", () => {
  assert.equal(tokenExpiry(jwt({ sub: "u", exp: 2_000_000_000 })), 2_000_000_000_000);
  // base64url payloads with - and _ and no padding.
  assert.equal(tokenExpiry(jwt({ sub: "ü>?~~", exp: 1_700_000_001 })), 1_700_000_001_000);
  for (const bad of ["", "opaque-token", "a.b", "a.%%%.c", jwt({ sub: "u" }), jwt({ exp: "soon" }), null, 42]) {
    assert.equal(tokenExpiry(bad), null, `tokenExpiry(${JSON.stringify(bad)})`);
  }
});

test("a token is refreshed a minute before it expires, or halfway for a short one", () => {
  const now = 1_000_000;
  assert.equal(refreshDelay(now + 3_600_000, now), 3_540_000);
  assert.equal(refreshDelay(now + 60_000, now), 30_000);
  assert.equal(refreshDelay(now + 10_000, now, 2_000), 8_000);
  assert.equal(refreshDelay(now - 1, now), 0);
  assert.equal(refreshDelay(null, now), null);
  // Never beyond what a timer can wait (setTimeout fires at once past 2^31 − 1 ms).
  assert.equal(refreshDelay(now + 90 * 86_400_000, now), 2 ** 31 - 1);
});

test("the token goes with the upgrade, and a fresh one in `auth` before it expires", async () => {
  // 4 s (3 to 4 once floored): enough for a connection on a busy machine before the refresh is due.
  const tokens = [jwt({ sub: "u", exp: inSeconds(4) }), jwt({ sub: "u", exp: inSeconds(3600) })];
  let calls = 0;
  const client = open({ token: async () => tokens[calls++], refreshMarginMs: 1500 });
  const peer = await gw.peer();
  assert.equal(peer.token, tokens[0]);
  assert.equal(peer.tokenVia, "subprotocol");
  await peer.next();
  peer.ready();
  // 3 to 4 s left, 1.5 s margin: the refresh comes within 2.5 s.
  const auth = await peer.next(8000);
  assert.deepEqual(auth, { type: "auth", token: tokens[1] });
  assert.equal(calls, 2);
  assert.equal(client.tokenExpiresAt, tokenExpiry(tokens[1]));
  const at = new Date(Date.now() + 7_200_000);
  peer.send({ type: "auth.ok", expiresAt: at.toISOString() });
  await until("auth.ok", () => client.tokenExpiresAt === at.getTime());
  assert.equal(await peer.maybeNext(200), undefined, "nothing more goes out");
});

test("a supplier that throws stops the client with the reason, without a socket", async () => {
  const client = open({ token: () => {
    throw new Error("not signed in");
  } });
  const s = await closedStatus(client);
  assert.equal(s.by, "token");
  assert.equal(s.message, "Could not get an access token: not signed in");
  assert.equal(s.error.message, "not signed in");
  assert.equal(client.status, "closed");
  assert.equal(await gw.peer(200).catch(() => null), null, "no connection without a token");
});

test("a supplier that rejects, returns nothing, or an expired token stops the client", async () => {
  for (const [supplier, want] of [
    [() => Promise.reject(new Error("backend down")), "backend down"],
    [async () => "", "it returned no token"],
    [async () => jwt({ sub: "u", exp: inSeconds(-10) }), "it returned a token that has expired"],
  ]) {
    const s = await closedStatus(open({ token: supplier }));
    assert.equal(s.message, `Could not get an access token: ${want}`);
  }
  assert.equal(gw.peers.length, 0);
});

test("a supplier that fails at refresh time stops the client and closes the socket", async () => {
  let calls = 0;
  const client = open({
    token: async () => {
      if (calls++ === 0) return jwt({ sub: "u", exp: inSeconds(2) });
      throw new Error("session ended");
    },
    refreshMarginMs: 1500,
  });
  const peer = await gw.peer();
  await peer.next();
  peer.ready();
  const s = await closedStatus(client);
  assert.equal(s.by, "token");
  assert.match(s.message, /session ended/);
  assert.equal((await peer.closed).code, 1000);
  assert.equal(await gw.peer(200).catch(() => null), null);
});

test("after a 4001 the supplier's new token is used to resume", async () => {
  let calls = 0;
  const client = open({ token: () => jwt({ sub: "u", n: ++calls, exp: inSeconds(3600) }) });
  const first = await gw.peer();
  await first.next();
  first.ready();
  await until("ready", () => client.ready);
  first.close(4001, "token expired");
  const second = await gw.peer();
  assert.notEqual(second.token, first.token);
  assert.deepEqual((await second.next()).resume, { sessionId: "s1", resumeToken: "t1" });
  second.ready({ resumed: true });
  await until("ready", () => client.ready);
  // Ready again: a later 4001 gets its own fresh-token resume.
  second.close(4001, "token expired");
  const third = await gw.peer();
  assert.equal((await third.next()).type, "session.start");
  assert.equal(calls, 3);
});

test("a fixed token is not re-sent as a refresh, and its expiry stops the client clearly", async () => {
  const fixed = jwt({ sub: "u", exp: inSeconds(2) });
  const client = open({ token: fixed, refreshMarginMs: 1500 });
  const first = await gw.peer();
  assert.equal(first.token, fixed);
  await first.next();
  first.ready();
  assert.equal(await first.maybeNext(1500), undefined, "no auth message with the same token");
  await until("expired", () => Date.now() > tokenExpiry(fixed));
  const closed = closedStatus(client);
  first.close(4001, "token expired");
  const s = await closed;
  assert.equal(s.by, "token");
  assert.equal(s.message, "Could not get an access token: it returned a token that has expired");
  assert.equal(gw.peers.length, 1);
});
