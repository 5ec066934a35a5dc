// A WebSocket server on loopback that plays the gateway in the tests: each
// connection is a Peer the test script reads from and writes to.

import { once } from "node:events";
import { afterEach, beforeEach } from "node:test";
import { WebSocket as WsWebSocket, WebSocketServer } from "ws";

/** The WebSocket the client uses in the tests: Node's own (a browser-like
 * implementation) when it has one, else the ws package's client. */
export const ClientWebSocket = globalThis.WebSocket ?? WsWebSocket;

export class Peer {
  /** The token the client presented (subprotocol turnstile.auth.<token>,
   * or the access_token query parameter), or null. */
  token;
  /** Where it came: "subprotocol", "query" or null. */
  tokenVia;
  /** The subprotocol selected. */
  protocol;
  closed; // resolves to {code, reason} when the socket closes
  #queue = [];
  #waiters = [];

  constructor(ws, req) {
    this.ws = ws;
    const offered = String(req.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim());
    const sub = offered.find((p) => p.startsWith("turnstile.auth."));
    const query = new URL(req.url, "http://x").searchParams.get("access_token");
    this.token = sub !== undefined ? sub.slice("turnstile.auth.".length) : query;
    this.tokenVia = sub !== undefined ? "subprotocol" : query !== null ? "query" : null;
    this.protocol = ws.protocol;
    this.closed = new Promise((resolve) => {
      ws.on("close", (code, reason) => {
        resolve({ code, reason: reason.toString() });
        this.#push(null);
      });
    });
    ws.on("message", (data, isBinary) => {
      this.#push(isBinary ? { binary: Buffer.from(data) } : JSON.parse(data.toString()));
    });
  }

  #push(frame) {
    const w = this.#waiters.shift();
    if (w) w(frame);
    else this.#queue.push(frame);
  }

  /** The next frame from the client: a parsed JSON message, {binary:
   * Buffer}, or null once closed. Rejects after `ms`. */
  next(ms = 5000) {
    if (this.#queue.length > 0) return Promise.resolve(this.#queue.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== done);
        reject(new Error(`no frame from the client in ${ms} ms`));
      }, ms);
      const done = (frame) => {
        clearTimeout(timer);
        resolve(frame);
      };
      this.#waiters.push(done);
    });
  }

  /** The next frame, or undefined when none comes in `ms`. */
  async maybeNext(ms) {
    try {
      return await this.next(ms);
    } catch {
      return undefined;
    }
  }

  /** The next text message (binary frames before it are skipped), or null
   * once closed. */
  async nextMessage(ms = 5000) {
    for (;;) {
      const f = await this.next(ms);
      if (f === null || !("binary" in f)) return f;
    }
  }

  send(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  sendBinary(buf) {
    this.ws.send(buf, { binary: true });
  }

  close(code, reason = "") {
    this.ws.close(code, reason);
  }

  /** session.ready for a session, merged with `extra`. */
  ready(extra = {}) {
    this.send({
      type: "session.ready", sessionId: "s1", resumeToken: "t1", mode: "text", resumed: false, turn: 0,
      registryVersion: "r1", model: { name: "m", offline: true }, ...extra,
    });
  }
}

/** Starts the server; `gw.peer()` resolves to the next connection. */
export async function startGateway() {
  const wss = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    handleProtocols: (protocols) => (protocols.has("turnstile.v1") ? "turnstile.v1" : false),
  });
  await once(wss, "listening");
  const peers = [];
  const waiting = [];
  let seen = 0;
  let closed = false;
  wss.on("connection", (ws, req) => {
    const peer = new Peer(ws, req);
    peers.push(peer);
    waiting.shift()?.();
  });
  return {
    url: `ws://127.0.0.1:${wss.address().port}/v1/ws`,
    peers,
    /** The next connection not handed out yet. */
    async peer(ms = 5000) {
      while (peers.length <= seen) {
        await new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no connection in ${ms} ms`)), ms);
          waiting.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return peers[seen++];
    },
    /** Stops the server; again, it does nothing. */
    async close() {
      if (closed) return;
      closed = true;
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await once(wss, "close");
    },
  };
}

/**
 * A fresh gateway for each test of the file, and the clients a test pushes
 * on `clients`, closed after it: `const { gw, clients } = useGateway();`.
 * `gw` stands for the current test's gateway.
 */
export function useGateway() {
  let current;
  const clients = [];
  beforeEach(async () => {
    current = await startGateway();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await current.close();
  });
  const gw = new Proxy(
    {},
    {
      get(_, key) {
        const v = current[key];
        return typeof v === "function" ? v.bind(current) : v;
      },
    },
  );
  return { gw, clients };
}

/** Polls cond() every 5 ms until it is truthy; rejects after `ms`. */
export async function until(what, cond, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Records the client's events of the given types, in order, as [type, payload]. */
export function record(client, ...types) {
  const log = [];
  for (const type of types) client.on(type, (payload) => log.push([type, payload]));
  return log;
}

/** A JWT-shaped token (unsigned: the client never verifies) expiring at
 * `exp` (seconds since the epoch). */
export function jwt(claims) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  return `${b64({ alg: "HS256", typ: "JWT" })}.${b64(claims)}.c2ln`;
}
