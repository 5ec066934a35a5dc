// useTurnstile: a React hook around a Client. The only module of the
// package that imports React (an optional peer dependency).

import { useEffect, useRef, useState, useSyncExternalStore } from "react";

import { Client } from "./client.js";

// Events after which the hook's state may have changed.
const WATCHED = ["status", "voice", "session.ready", "mode", "turn.start", "turn.done", "history"];

const IDLE_STATE = Object.freeze({
  status: "idle",
  ready: false,
  sessionId: null,
  mode: null,
  turn: 0,
  busy: false,
  closed: null,
  voice: Object.freeze({ mode: null, switching: null, mic: "off", stopping: false, blocked: false, playback: "idle" }),
});

// One store per client: a snapshot that changes identity only when a value does.
const stores = new WeakMap();

function storeOf(client) {
  let store = stores.get(client);
  if (store !== undefined) return store;
  let snapshot = IDLE_STATE;
  let running = null; // the turn between turn.start and turn.done
  let closed = null;
  const listeners = new Set();
  const recompute = () => {
    const v = client.voice.snapshot();
    const next = {
      status: client.status,
      ready: client.ready,
      sessionId: client.sessionId,
      mode: client.mode,
      turn: client.turn,
      busy: running !== null,
      closed,
      voice: sameVoice(snapshot.voice, v) ? snapshot.voice : Object.freeze(v),
    };
    if (Object.keys(next).some((k) => next[k] !== snapshot[k])) {
      snapshot = Object.freeze(next);
      for (const fn of listeners) fn();
    }
  };
  for (const type of WATCHED) {
    client.on(type, (ev) => {
      if (type === "turn.start") running = ev.turn;
      else if (type === "turn.done" && (running === null || ev.turn === running)) running = null;
      else if (type === "status") {
        if (ev.state !== "ready") running = null;
        closed = ev.state === "closed" ? ev : null;
      }
      recompute();
    });
  }
  recompute();
  store = {
    subscribe(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    get: () => snapshot,
  };
  stores.set(client, store);
  return store;
}

function sameVoice(a, b) {
  return Object.keys(b).every((k) => a[k] === b[k]);
}

const noop = () => () => {};
const idle = () => IDLE_STATE;

/**
 * Connects to the gateway while the component is mounted (and `enabled`
 * is not false); reconnects when `url` or `mode` change. The token supplier
 * and other options are read when needed, so an inline function is fine.
 * Returns the client (null before the first effect) and its state.
 */
export function useTurnstile(options) {
  const latest = useRef(options);
  latest.current = options;
  const [client, setClient] = useState(null);
  const { url, mode, enabled = true } = options;

  useEffect(() => {
    if (!enabled) return undefined;
    const { token, ...rest } = latest.current;
    const supplier = token == null ? null : () => {
      const t = latest.current.token;
      return typeof t === "function" ? t() : t;
    };
    const c = new Client({ ...rest, url, mode, token: supplier });
    storeOf(c);
    setClient(c);
    c.connect();
    return () => {
      c.close();
      setClient(null);
    };
  }, [url, mode, enabled]);

  const store = client === null ? null : storeOf(client);
  const state = useSyncExternalStore(store?.subscribe ?? noop, store?.get ?? idle, store?.get ?? idle);
  return { client, ...state };
}
