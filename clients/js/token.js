// Access tokens as the client needs them: when a JWT expires (read from its
// payload, never verified here: the gateway verifies), and when to ask the
// token supplier for the next one. No browser globals.

/** The longest a timer may wait: setTimeout fires at once beyond 2^31 − 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The expiry of a JWT in ms since the epoch (its `exp` claim), or null
 * when the token is not a JWT or has no numeric `exp`. */
export function tokenExpiry(token) {
  if (typeof token !== "string") return null;
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = new TextDecoder().decode(Uint8Array.from(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, "=")), (c) => c.charCodeAt(0)));
    const exp = JSON.parse(json)?.exp;
    return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : null;
  } catch {
    return null;
  }
}

/**
 * How long to wait before refreshing a token that expires at `expiresAt`
 * (ms since the epoch; null: never), or null for no refresh. The refresh
 * happens `marginMs` before expiry, or halfway through what is left of a
 * token that lives shorter than twice the margin, so a short-lived token is
 * still refreshed in time.
 */
export function refreshDelay(expiresAt, now = Date.now(), marginMs = 60_000) {
  if (expiresAt === null || !Number.isFinite(expiresAt)) return null;
  const left = expiresAt - now;
  if (left <= 0) return 0;
  return Math.min(MAX_TIMER_MS, Math.max(0, left - Math.min(marginMs, left / 2)));
}

/**
 * The application's token supplier, and the timer that asks it again
 * before the token in use expires. `onRefresh()` runs when that time comes.
 */
export class TokenSource {
  #supply;
  #marginMs;
  #onRefresh;
  #timer = null;
  #last = null;
  /** The expiry of the token in use (ms since the epoch), or null. */
  expiresAt = null;

  /** `supply` is a function returning the token (or a promise of it), a
   * fixed token string, or null (no token: a gateway in dev mode). */
  constructor(supply, { marginMs = 60_000, onRefresh }) {
    if (supply !== null && typeof supply !== "function" && typeof supply !== "string") {
      throw new TypeError("turnstile: token must be a function returning the token (or a string)");
    }
    this.#supply = typeof supply === "string" ? () => supply : supply;
    this.#marginMs = marginMs;
    this.#onRefresh = onRefresh;
  }

  /** False when there is no supplier. */
  get enabled() {
    return this.#supply !== null;
  }

  /** Asks the supplier; resolves to a token that can be used, or rejects
   * with why not (what it threw, none, an expired one). */
  async next() {
    const token = await this.#supply();
    if (typeof token !== "string" || token === "") throw new Error("it returned no token");
    const exp = tokenExpiry(token);
    if (exp !== null && exp <= Date.now()) throw new Error("it returned a token that has expired");
    return token;
  }

  /** True when `token` is the one last sent (a fixed token refreshes nothing). */
  isCurrent(token) {
    return token === this.#last;
  }

  /** `token` went to the gateway: refresh it before its `exp`. */
  sent(token) {
    this.#last = token;
    this.schedule(tokenExpiry(token));
  }

  /** The token in use expires at `expiresAt` (e.g. the gateway's auth.ok). */
  schedule(expiresAt) {
    this.cancel();
    this.expiresAt = expiresAt;
    const wait = refreshDelay(expiresAt, Date.now(), this.#marginMs);
    if (wait === null || this.#supply === null) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#onRefresh();
    }, wait);
  }

  cancel() {
    clearTimeout(this.#timer);
    this.#timer = null;
  }
}
