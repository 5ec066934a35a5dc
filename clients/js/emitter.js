// Listeners by event type, for the Client. A listener that throws is
// reported and does not stop the others (nor the client's own state).

export class Emitter {
  #listeners = new Map();

  /** Listens for `type`; returns a function that stops listening. */
  on(type, fn) {
    let set = this.#listeners.get(type);
    if (set === undefined) this.#listeners.set(type, (set = new Set()));
    set.add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this.#listeners.get(type)?.delete(fn);
  }

  /** True when something listens for `type`. */
  has(type) {
    return (this.#listeners.get(type)?.size ?? 0) > 0;
  }

  emit(type, payload) {
    const set = this.#listeners.get(type);
    if (set === undefined) return;
    for (const fn of [...set]) {
      try {
        fn(payload);
      } catch (err) {
        if (typeof reportError === "function") reportError(err);
        else console.error(err);
      }
    }
  }
}
