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
