// Formatting of gateway data for people: tool arguments, durations and
// countdowns. Pure functions, no DOM, so they run under Node in the tests.

// The gateway sends this string for every argument the tool's redact
// allow-list does not name.
export const REDACTED = "[redacted]";

const VALUE_MAX = 40;
const LINE_MAX = 120;

function clip(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** One argument value, short: strings quoted, redacted values bare,
 * objects and arrays as clipped JSON. */
export function compactValue(value, max = VALUE_MAX) {
  if (value === REDACTED) return REDACTED;
  if (typeof value === "string") return JSON.stringify(clip(value, max));
  let json;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined;
  }
  return clip(json ?? String(value), max);
}

/** A tool call's (redacted) arguments on one line, e.g.
 * `query: "How long…", limit: 3`; "" for no arguments. */
export function compactArgs(args, max = LINE_MAX) {
  if (args === undefined || args === null) return "";
  if (typeof args !== "object" || Array.isArray(args)) return compactValue(args, max);
  const parts = Object.entries(args).map(([key, value]) => `${key}: ${compactValue(value)}`);
  return clip(parts.join(", "), max);
}

/** Arguments as [key, text] pairs for a full display (the confirmation
 * dialog): strings as they are, other values as indented JSON, each clipped
 * to `max` characters. */
export function argRows(args, max = 600) {
  if (args === undefined || args === null) return [];
  if (typeof args !== "object" || Array.isArray(args)) return [["", clip(JSON.stringify(args) ?? "", max)]];
  return Object.entries(args).map(([key, value]) => {
    const text = typeof value === "string" ? value : JSON.stringify(value, null, 2) ?? String(value);
    return [key, clip(text, max)];
  });
}

/** A duration in milliseconds: "12 ms", "1.4 s", "2 min 5 s"; "" when unknown. */
export function formatDuration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** Time left as a clock: "0:42", "12:05", "1:02:03"; days past a day.
 * Rounds up, so "0:00" only shows when the time is up. */
export function formatRemaining(ms) {
  const total = Math.max(0, Math.ceil(ms / 1000));
  const days = Math.floor(total / 86_400);
  if (days >= 1) {
    const hours = Math.floor((total % 86_400) / 3600);
    return hours ? `${days} d ${hours} h` : `${days} d`;
  }
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

/** Milliseconds since the epoch for an RFC 3339 time, or NaN. */
export function parseTime(value) {
  return typeof value === "string" ? Date.parse(value) : NaN;
}
