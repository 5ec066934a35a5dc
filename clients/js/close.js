// What to do when the gateway closes the socket (docs/protocol.md, "Close
// codes"), and how long to wait before trying again. No browser globals.

/** Reconnect delays: from BACKOFF_MIN_MS doubling up to BACKOFF_MAX_MS. */
export const BACKOFF_MIN_MS = 500;
export const BACKOFF_MAX_MS = 10_000;

/** Delay before reconnect attempt `attempt` (0-based): 0.5 s doubling to
 * 10 s, minus up to 30 % jitter so that clients dropped together by a deploy
 * do not come back in lockstep. */
export function backoffDelay(attempt, random = Math.random, { minMs = BACKOFF_MIN_MS, maxMs = BACKOFF_MAX_MS } = {}) {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(Math.max(0, attempt), 16));
  return Math.round(base * (0.7 + 0.3 * random()));
}

/** What to do after the gateway closed the socket with `code`:
 * "reconnect" (and resume), "reauth" (get a fresh token and resume, once),
 * "restart" (forget the session, start a new one) or "stop" (do not
 * reconnect as is). */
export function closeAction(code) {
  if (code === 4001) return "reauth";
  if (code === 4004) return "restart";
  if (code >= 4100 && code <= 4199) return "reconnect";
  if (code >= 4000 && code <= 4099) return "stop";
  // 1000: the gateway closed on purpose. The others are errors that the same
  // client would only repeat: protocol error, unacceptable data, bad UTF-8,
  // policy violation, message too big, missing extension.
  if ([1000, 1002, 1003, 1007, 1008, 1009, 1010].includes(code)) return "stop";
  // 1001 going away, 1005/1006 no close frame (network loss, or a refused
  // upgrade: browsers do not tell a 401 from a dead network), 1011-1015 and
  // anything unknown: the link failed, not this client.
  return "reconnect";
}

const CLOSE_TEXT = {
  1000: "The gateway closed the connection.",
  1009: "A message was too large for the gateway.",
  4001: "Your access token is no longer valid. Sign in again.",
  4002: "The gateway refused a message from this client (protocol violation).",
  4003: "You are blocked from this chat for now.",
  4004: "The conversation could not be resumed.",
  4005: "This conversation was opened in another tab or window.",
  4008: "Too many messages, new sessions or reconnections: the gateway ended the connection.",
  4009: "This conversation was ended by an operator.",
};

/** A sentence for the user about a close that stopped the connection. */
export function describeClose(code) {
  return CLOSE_TEXT[code] ?? "The gateway ended the connection.";
}

const RETRY_AFTER = /; retry after (\d+) s$/;

/** How long (ms) the gateway asked the client to wait before connecting
 * again — a close reason ending "; retry after N s" (a 4008 for rate abuse,
 * too many resumes or too many new sessions) — or null when it did not say. */
export function retryAfterMs(reason) {
  const m = RETRY_AFTER.exec(String(reason ?? ""));
  return m === null ? null : Number(m[1]) * 1000;
}
