// useTurnstile in a real React renderer against the test gateway: it
// connects on mount, reflects the session's state, reads the latest token
// supplier, and closes the socket on unmount.

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

import { createElement } from "react";
import TestRenderer from "react-test-renderer";

import { useTurnstile } from "../react.js";
import { ClientWebSocket, startGateway, until } from "./gateway.js";

globalThis.IS_REACT_ACT_ENVIRONMENT = true;
const { act, create } = TestRenderer;

let gw;
afterEach(async () => gw?.close());

function Probe({ options, seen }) {
  const state = useTurnstile(options);
  seen.push(state);
  return null;
}

// Waits outside act for a condition, then lets React catch up.
async function settle(what, cond) {
  await act(async () => {
    await until(what, cond);
  });
}

test("the hook connects while mounted, follows the session, and closes on unmount", async () => {
  gw = await startGateway();
  const seen = [];
  const latest = () => seen.at(-1);
  let supplied = "tok-1";
  const options = () => ({ url: gw.url, token: () => supplied, WebSocket: ClientWebSocket, audio: false });
  let renderer;
  await act(async () => {
    renderer = create(createElement(Probe, { options: options(), seen }));
  });
  assert.equal(seen[0].client, null);
  assert.equal(seen[0].status, "idle");
  const peer = await gw.peer();
  assert.equal(peer.token, "tok-1");
  assert.equal((await peer.next()).type, "session.start");
  await act(async () => peer.ready({ mode: "text" }));
  await settle("ready", () => latest().ready);
  assert.equal(latest().status, "ready");
  assert.equal(latest().sessionId, "s1");
  assert.equal(latest().mode, "text");

  await act(async () => peer.send({ type: "turn.start", turn: 1, text: "hi" }));
  await settle("busy", () => latest().busy && latest().turn === 1);
  await act(async () => peer.send({ type: "turn.done", turn: 1, reason: "end_turn" }));
  await settle("done", () => !latest().busy);
  const renders = seen.length;
  await act(async () => peer.send({ type: "text.delta", turn: 1, text: "x" }));
  assert.equal(seen.length, renders, "a message that changes no state renders nothing");

  // A re-render with a new supplier: the next connection uses it.
  supplied = "tok-2";
  await act(async () => renderer.update(createElement(Probe, { options: options(), seen })));
  await act(async () => peer.close(4100, "draining"));
  const again = await gw.peer();
  assert.equal(again.token, "tok-2");
  assert.equal((await again.next()).resume.sessionId, "s1");

  await act(async () => renderer.unmount());
  assert.equal((await again.closed).code, 1000);
});

test("a stopped client's reason is in the state", async () => {
  gw = await startGateway();
  const seen = [];
  let renderer;
  await act(async () => {
    renderer = create(createElement(Probe, {
      options: { url: gw.url, token: () => Promise.reject(new Error("signed out")), WebSocket: ClientWebSocket, audio: false },
      seen,
    }));
  });
  await settle("closed", () => seen.at(-1).closed !== null);
  assert.equal(seen.at(-1).status, "closed");
  assert.equal(seen.at(-1).closed.by, "token");
  assert.match(seen.at(-1).closed.message, /signed out/);
  await act(async () => renderer.unmount());
});
