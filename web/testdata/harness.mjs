// Runs the page's DOM-free modules under Node for client_node_test.go.
// Prints JSON lines.
import { ConfirmQueue } from "./confirm.js";
import { compactArgs, formatDuration, formatRemaining } from "./format.js";
import { Connection, backoffDelay, closeAction, gatewayURL } from "./protocol.js";

const [mode, arg] = process.argv.slice(2);
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");

function memoryStorage() {
  const items = new Map();
  return {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => items.set(k, String(v)),
    removeItem: (k) => items.delete(k),
  };
}

const snapshot = (queue) => queue.items.map(({ token, tool, sent }) => ({ token, tool, sent }));

switch (mode) {
  case "classify":
    out(Object.fromEntries(JSON.parse(arg).map((code) => [code, closeAction(code)])));
    break;
  case "url":
    out(JSON.parse(arg).map((loc) => gatewayURL(loc)));
    break;
  case "backoff":
    out([...Array(8).keys()].map((a) => [backoffDelay(a, () => 0), backoffDelay(a, () => 0.999999)]));
    break;
  case "format": {
    const { args, durations, remaining } = JSON.parse(arg);
    out({
      args: args.map((a) => compactArgs(a)),
      durations: durations.map((ms) => formatDuration(ms)),
      remaining: remaining.map((ms) => formatRemaining(ms)),
    });
    break;
  }
  case "queue": {
    // Plays a script of operations on a ConfirmQueue with a fake clock;
    // prints, per step, what the operation returned and the queue after it.
    let now = Date.parse("2030-01-01T00:00:00Z");
    let changes = 0;
    const queue = new ConfirmQueue({ now: () => now, onChange: () => changes++ });
    for (const step of JSON.parse(arg)) {
      let result = null;
      switch (step.op) {
        case "add": result = queue.add(step.msg); break;
        case "replace": result = queue.replace(step.list).map((i) => i.token); break;
        case "answer": result = queue.answer(step.token, step.approve); break;
        case "unsend": queue.unsend(step.token); break;
        case "settle": result = queue.settle(step.token)?.token ?? null; break;
        case "dropSent": result = queue.dropSent().map((i) => i.token); break;
        case "advance": now += step.ms; result = queue.nextExpiryIn(); break;
        case "expire": result = queue.expire().map((i) => i.token); break;
        default: process.exit(4);
      }
      out({ op: step.op, result, queue: snapshot(queue), changed: changes > 0 });
      changes = 0;
    }
    break;
  }
  case "confirm": {
    // Connects like the page and answers each confirmation request as it
    // reaches the head of the queue, the way app.js does: tokens ending in
    // "-yes" are approved, "-no" denied, others left for "another tab".
    // Each answer is attempted twice, as a double click would.
    if (typeof WebSocket === "undefined") process.exit(3);
    let conn;
    const queue = new ConfirmQueue({
      onChange: () => {
        out({ event: "queue", items: snapshot(queue) });
        const head = queue.current;
        if (head === null || head.sent || !conn.ready) return;
        const approve = head.token.endsWith("-yes") ? true : head.token.endsWith("-no") ? false : null;
        if (approve === null) return;
        for (let i = 0; i < 2; i++) {
          const fields = queue.answer(head.token, approve);
          if (fields !== null && !conn.send("confirm", fields)) queue.unsend(head.token);
        }
      },
    });
    conn = new Connection({
      url: arg,
      storage: memoryStorage(),
      onMessage: (msg) => {
        out({ event: "message", type: msg.type });
        if (msg.type === "session.ready") queue.replace(msg.resumed === true ? msg.pendingConfirmations : []);
        else if (msg.type === "confirm.request") queue.add(msg);
        else if (msg.type === "confirm.done") queue.settle(msg.token);
      },
      onStatus: (status) => {
        out({ event: "status", ...status });
        if (status.state === "stopped") process.exit(0);
      },
    });
    conn.connect();
    setTimeout(() => {
      out({ event: "timeout" });
      process.exit(2);
    }, 15_000);
    break;
  }
  case "connect": {
    if (typeof WebSocket === "undefined") process.exit(3);
    const storage = memoryStorage();
    const conn = new Connection({
      url: arg,
      storage,
      onMessage: (msg) => out({ event: "message", type: msg.type }),
      onStatus: (status) => {
        out({ event: "status", ...status });
        if (status.state === "stopped") {
          out({ event: "stored", value: storage.getItem("turnstile.session") });
          process.exit(0);
        }
      },
    });
    conn.connect();
    setTimeout(() => {
      out({ event: "timeout" });
      process.exit(2);
    }, 15_000);
    break;
  }
  default:
    process.exit(4);
}
