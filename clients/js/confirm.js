// The queue of confirmation requests waiting for the user's answer
// (docs/protocol.md, "Confirmations"): a page shows the head of the queue
// in a dialog, sends the answer once, and keeps the queue in step with the
// gateway across reconnects. No DOM.

function parseTime(value) {
  return typeof value === "string" ? Date.parse(value) : NaN;
}

/**
 * A confirm.request as the queue keeps it:
 * { token, tool, args, turn, expiresAt (ms since the epoch), receivedAt, sent }.
 * `sent` is true between sending the user's answer and the gateway's
 * confirm.done (or a reconnect, which re-lists what is still pending).
 */
export function parseRequest(msg, now = Date.now()) {
  const token = msg?.token;
  const expiresAt = parseTime(msg?.expiresAt);
  if (typeof token !== "string" || token === "" || !Number.isFinite(expiresAt)) return null;
  return {
    token,
    tool: typeof msg.tool === "string" && msg.tool ? msg.tool : "a tool",
    args: msg.args ?? {},
    turn: Number.isInteger(msg.turn) ? msg.turn : null,
    expiresAt,
    receivedAt: now,
    sent: false,
  };
}

/** Pending confirmation requests in the order they arrived. `onChange()`
 * runs after every change of the queue or of an entry's `sent` state. */
export class ConfirmQueue {
  #items = [];
  #now;
  #onChange;

  constructor({ now = Date.now, onChange = () => {} } = {}) {
    this.#now = now;
    this.#onChange = onChange;
  }

  /** The request on screen (the oldest), or null. */
  get current() {
    return this.#items[0] ?? null;
  }

  /** All requests, oldest first (copies). */
  get items() {
    return this.#items.map((item) => ({ ...item }));
  }

  get length() {
    return this.#items.length;
  }

  /** Queues a confirm.request: "added", or "duplicate" (already queued),
   * "expired" (too late to answer) or "invalid" (not queued). */
  add(msg) {
    const now = this.#now();
    const item = parseRequest(msg, now);
    if (item === null) return "invalid";
    if (this.#items.some((i) => i.token === item.token)) return "duplicate";
    if (item.expiresAt <= now) return "expired";
    this.#items.push(item);
    this.#onChange();
    return "added";
  }

  /** Replaces the queue with the gateway's list of pending requests (from
   * session.ready): anything not listed was answered or expired meanwhile,
   * and an answer that got no confirm.done before the link dropped can be
   * given again. Returns the requests dropped because they were not listed. */
  replace(list) {
    const now = this.#now();
    const before = this.#items;
    const next = [];
    for (const msg of Array.isArray(list) ? list : []) {
      const item = parseRequest(msg, now);
      if (item === null || item.expiresAt <= now || next.some((i) => i.token === item.token)) continue;
      const known = before.find((i) => i.token === item.token);
      if (known) item.receivedAt = known.receivedAt; // keep the countdown's scale
      next.push(item);
    }
    this.#items = next;
    this.#onChange();
    return before.filter((old) => !next.some((i) => i.token === old.token));
  }

  /**
   * Records the user's answer to `token` and returns the `confirm` message
   * fields to send ({token, approve} with approve a boolean), or null when
   * there is nothing to answer: unknown token, an answer already sent, or
   * expired. Call unsend() when the message could not be sent.
   */
  answer(token, approve) {
    const item = this.#items.find((i) => i.token === token);
    if (item === undefined || item.sent || item.expiresAt <= this.#now()) return null;
    item.sent = true;
    this.#onChange();
    return { token, approve: approve === true };
  }

  /** Makes `token` answerable again after its answer failed to go out. */
  unsend(token) {
    const item = this.#items.find((i) => i.token === token);
    if (item?.sent) {
      item.sent = false;
      this.#onChange();
    }
  }

  /** Removes `token` (its confirm.done arrived); returns it, or null. */
  settle(token) {
    return this.#remove((i) => i.token === token)[0] ?? null;
  }

  /** Removes the requests whose answer was sent (the gateway refused that
   * answer, e.g. confirmation_unknown); returns them. */
  dropSent() {
    return this.#remove((i) => i.sent);
  }

  /** Removes the requests whose time is up; returns them. */
  expire() {
    const now = this.#now();
    return this.#remove((i) => i.expiresAt <= now);
  }

  /** Milliseconds until the next request expires, or null when none waits. */
  nextExpiryIn() {
    if (this.#items.length === 0) return null;
    return Math.max(0, Math.min(...this.#items.map((i) => i.expiresAt)) - this.#now());
  }

  /** Empties the queue (a new session). */
  clear() {
    if (this.#items.length === 0) return;
    this.#items = [];
    this.#onChange();
  }

  #remove(match) {
    const gone = this.#items.filter(match);
    if (gone.length > 0) {
      this.#items = this.#items.filter((i) => !match(i));
      this.#onChange();
    }
    return gone;
  }
}
