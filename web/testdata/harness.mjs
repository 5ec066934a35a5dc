// Runs protocol.js under Node for client_node_test.go. Prints JSON lines.
import { Connection, backoffDelay, closeAction, gatewayURL } from "./protocol.js";

const [mode, arg] = process.argv.slice(2);
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");

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
  case "connect": {
    if (typeof WebSocket === "undefined") process.exit(3);
    const items = new Map();
    const storage = {
      getItem: (k) => (items.has(k) ? items.get(k) : null),
      setItem: (k, v) => items.set(k, String(v)),
      removeItem: (k) => items.delete(k),
    };
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
