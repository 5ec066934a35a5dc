// Confirmation requests: queued in arrival order, answered once, expired on
// time, and re-listed by the gateway after a reconnect.

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";

import { ConfirmQueue, connect } from "../index.js";
import { ClientWebSocket, startGateway, until } from "./gateway.js";

const EPOCH = Date.parse("2030-01-01T00:00:00Z");
const at = (ms) => new Date(EPOCH + ms).toISOString();
const request = (token, tool, inMs) => ({ type: "confirm.request", turn: 1, token, tool, args: { orderId: "o-1" }, expiresAt: at(inMs) });

/** A queue on a fake clock; changes() counts onChange calls since the last look. */
function fakeQueue() {
  const clock = { now: EPOCH };
  let changes = 0;
  const queue = new ConfirmQueue({ now: () => clock.now, onChange: () => changes++ });
  const changed = () => {
    const c = changes > 0;
    changes = 0;
    return c;
  };
  return { queue, clock, changed };
}

const tokens = (queue) => queue.items.map((i) => i.token + (i.sent ? "(sent)" : "")).join(",");

test("requests queue in arrival order, without duplicates or expired ones", () => {
  const { queue, changed } = fakeQueue();
  assert.equal(queue.add(request("a", "kb_refund", 60_000)), "added");
  assert.equal(queue.add(request("b", "kb_cancel", 120_000)), "added");
  changed();
  assert.equal(queue.add(request("a", "kb_refund", 60_000)), "duplicate");
  assert.equal(queue.add(request("late", "kb_refund", -1000)), "expired");
  assert.equal(changed(), false, "a duplicate or expired request changed the queue");
  assert.equal(queue.add({ type: "confirm.request", tool: "kb_refund", expiresAt: at(60_000) }), "invalid");
  assert.equal(queue.add({ type: "confirm.request", token: "t", expiresAt: "soon" }), "invalid");
  assert.equal(tokens(queue), "a,b");
  assert.equal(queue.current.token, "a");
});

test("an answer goes out once, with the token and a boolean approve", () => {
  const { queue } = fakeQueue();
  queue.add(request("a", "kb_refund", 60_000));
  queue.add(request("b", "kb_cancel", 60_000));
  assert.deepEqual(queue.answer("a", true), { token: "a", approve: true });
  assert.equal(queue.answer("a", false), null, "a double click, or Esc after Allow");
  assert.equal(tokens(queue), "a(sent),b");
  assert.deepEqual(queue.answer("b", "yes"), { token: "b", approve: false }, "anything but true denies");
  assert.equal(queue.answer("nope", true), null);
  queue.unsend("b"); // the socket was down: b can be answered again
  assert.equal(tokens(queue), "a(sent),b");
  assert.deepEqual(queue.answer("b", false), { token: "b", approve: false });
  assert.equal(queue.settle("a").token, "a");
  assert.equal(queue.settle("a"), null);
  assert.equal(tokens(queue), "b(sent)");
});

test("requests close when they expire", () => {
  const { queue, clock } = fakeQueue();
  queue.add(request("short", "kb_refund", 30_000));
  queue.add(request("long", "kb_cancel", 90_000));
  clock.now += 29_000;
  assert.equal(queue.nextExpiryIn(), 1000);
  assert.deepEqual(queue.expire(), []);
  clock.now += 1000;
  assert.equal(queue.answer("short", true), null, "too late to answer");
  assert.deepEqual(queue.expire().map((i) => i.token), ["short"]);
  assert.equal(tokens(queue), "long");
});

test("a reconnect re-queues what is pending and drops what was settled", () => {
  const { queue } = fakeQueue();
  queue.add(request("a", "kb_refund", 60_000));
  queue.add(request("b", "kb_cancel", 60_000));
  queue.answer("a", true);
  // The link dropped before confirm.done; session.ready lists a (the
  // answer never arrived), c (new), not b (answered in another tab).
  const dropped = queue.replace([request("c", "kb_close", 60_000), request("a", "kb_refund", 60_000), request("gone", "kb_refund", -1000), request("c", "kb_close", 60_000)]);
  assert.deepEqual(dropped.map((i) => i.token), ["b"]);
  assert.equal(tokens(queue), "c,a");
  assert.deepEqual(queue.answer("a", false), { token: "a", approve: false });
  assert.deepEqual(queue.dropSent().map((i) => i.token), ["a"], "confirmation_unknown for that answer");
  assert.equal(tokens(queue), "c");
  queue.replace(null); // a new session: nothing pending
  assert.equal(queue.length, 0);
});

let gw;
afterEach(async () => gw?.close());

test("confirmations are answered once over the connection and re-listed after a resume", async () => {
  gw = await startGateway();
  const client = connect({ url: gw.url, WebSocket: ClientWebSocket, audio: false, backoff: { minMs: 20, maxMs: 50 } });
  const states = [];
  // The page's way: answer the head of the queue when it changes; tokens
  // ending in -yes are approved, -no denied. Each answer is tried twice, as
  // a double click would.
  const queue = new ConfirmQueue({
    onChange: () => {
      states.push(tokens(queue));
      const head = queue.current;
      if (head === null || head.sent || !client.ready) return;
      const approve = head.token.endsWith("-yes") ? true : head.token.endsWith("-no") ? false : null;
      if (approve === null) return;
      for (let i = 0; i < 2; i++) {
        const fields = queue.answer(head.token, approve);
        if (fields !== null && !client.confirm(fields.token, fields.approve)) queue.unsend(head.token);
      }
    },
  });
  client.on("session.ready", (m) => queue.replace(m.resumed === true ? m.pendingConfirmations : []));
  client.on("confirm.request", (m) => queue.add(m));
  client.on("confirm.done", (m) => queue.settle(m.token));
  const req = (token, tool, inMs) => ({ ...request(token, tool, 0), expiresAt: new Date(Date.now() + inMs).toISOString() });

  const first = await gw.peer();
  await first.next();
  first.ready();
  first.send(req("a-yes", "kb_refund", 60_000));
  first.send(req("late-no", "kb_refund", -1000));
  first.send(req("a-yes", "kb_refund", 60_000));
  first.send(req("b-no", "kb_cancel", 60_000));
  assert.deepEqual(await first.next(), { token: "a-yes", approve: true, type: "confirm" });
  first.close(4100, "draining"); // before confirm.done

  const second = await gw.peer();
  assert.equal((await second.next()).resume.sessionId, "s1");
  second.ready({ resumed: true, turn: 1, pendingConfirmations: [req("a-yes", "kb_refund", 60_000), req("b-no", "kb_cancel", 60_000)] });
  assert.deepEqual(await second.next(), { token: "a-yes", approve: true, type: "confirm" }, "answered again: no confirm.done had come");
  second.send({ type: "confirm.done", token: "a-yes", tool: "kb_refund", outcome: "approved" });
  assert.deepEqual(await second.next(), { token: "b-no", approve: false, type: "confirm" });
  second.send({ type: "confirm.done", token: "b-no", tool: "kb_cancel", outcome: "denied" });
  second.send(req("d-other", "kb_close", 60_000));
  second.send({ type: "confirm.done", token: "d-other", tool: "kb_close", outcome: "approved" });
  await until("d-other settled", () => states.at(-1) === "" && states.includes("d-other"));
  assert.equal(await second.maybeNext(100), undefined, "no further answers");
  client.close();
  // The queue as a dialog would have seen it.
  assert.deepEqual(states, ["", "a-yes", "a-yes(sent)", "a-yes(sent),b-no", "a-yes,b-no", "a-yes(sent),b-no", "b-no", "b-no(sent)", "", "d-other", ""]);
});
