// The confirmation dialog: a modal that shows one pending confirm.request
// (the head of the ConfirmQueue) with its tool, arguments and a live
// countdown, and reports the user's Allow or Deny. Esc denies. All text goes
// in through textContent.

import { argRows, formatRemaining } from "./format.js";
import { el } from "./dom.js";

const TICK_MS = 250;

export class ConfirmDialog {
  #root;
  #onAnswer;
  #fallbackFocus;
  #tool;
  #args;
  #countdown;
  #bar;
  #state;
  #queue;
  #allow;
  #deny;
  #item = null; // the request on screen
  #answerable = false;
  #timer = null;
  #returnFocus = null;

  /**
   * `root` is the <dialog> element of index.html. onAnswer(token, approve)
   * runs when the user allows or denies the request on screen; focus goes
   * back to where it was when the dialog opened, else to `fallbackFocus`.
   */
  constructor(root, { onAnswer, fallbackFocus }) {
    this.#root = root;
    this.#onAnswer = onAnswer;
    this.#fallbackFocus = fallbackFocus;
    const part = (name) => root.querySelector(`[data-part="${name}"]`);
    this.#tool = part("tool");
    this.#args = part("args");
    this.#countdown = part("countdown");
    this.#bar = part("bar");
    this.#state = part("state");
    this.#queue = part("queue");
    this.#allow = part("allow");
    this.#deny = part("deny");

    this.#allow.addEventListener("click", () => this.#answer(true));
    this.#deny.addEventListener("click", () => this.#answer(false));
    root.addEventListener("keydown", (ev) => this.#keydown(ev));
    // The browser's own Esc handling (and close requests such as the Android
    // back gesture) must not close the dialog without an answer.
    root.addEventListener("cancel", (ev) => {
      ev.preventDefault();
      this.#answer(false);
    });
  }

  /** The token on screen, or null when the dialog is closed. */
  get token() {
    return this.#item?.token ?? null;
  }

  /**
   * Shows `item` (a ConfirmQueue entry), or closes the dialog for null.
   * `waiting` is how many more requests are queued behind it. Once the
   * answer is sent the buttons are disabled until the request goes away.
   */
  show(item, waiting = 0) {
    if (item === null) {
      this.#close();
      return;
    }
    const fresh = item.token !== this.#item?.token;
    this.#item = item;
    if (fresh) this.#fill(item);
    this.#answerable = !item.sent;
    this.#allow.disabled = this.#deny.disabled = !this.#answerable;
    this.#state.textContent = item.sent ? "Sending your answer…" : "";
    this.#queue.textContent =
      waiting > 0 ? `${waiting} more ${waiting === 1 ? "request is" : "requests are"} waiting after this one.` : "";

    if (!this.#root.open) {
      const active = document.activeElement;
      this.#returnFocus = active && active !== document.body && !this.#root.contains(active) ? active : null;
      this.#root.showModal();
    }
    if (fresh) this.#startTimer();
    if (fresh || !this.#root.contains(document.activeElement) || document.activeElement?.disabled) {
      // Deny is the safe default for a stray Enter; with the buttons off,
      // the dialog itself holds focus so that Esc and Tab still reach it.
      (this.#answerable ? this.#deny : this.#root).focus();
    }
  }

  #fill(item) {
    this.#tool.textContent = item.tool;
    const rows = argRows(item.args);
    const list = [];
    for (const [key, text] of rows) {
      if (key) list.push(el("dt", "", key));
      list.push(el("dd", "", text));
    }
    if (list.length === 0) list.push(el("dd", "muted", "(no arguments)"));
    this.#args.replaceChildren(...list);
  }

  #startTimer() {
    clearInterval(this.#timer);
    this.#tick();
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
  }

  #tick() {
    const item = this.#item;
    if (item === null) return;
    const left = item.expiresAt - Date.now();
    this.#countdown.textContent = formatRemaining(left);
    const span = Math.max(1, item.expiresAt - item.receivedAt);
    this.#bar.style.transform = `scaleX(${Math.min(1, Math.max(0, left / span))})`;
    this.#root.classList.toggle("urgent", left <= 10_000);
  }

  #answer(approve) {
    if (!this.#answerable || this.#item === null) return;
    this.#onAnswer(this.#item.token, approve);
  }

  #keydown(ev) {
    if (ev.key === "Escape") {
      ev.preventDefault();
      this.#answer(false);
      return;
    }
    if (ev.key !== "Tab") return;
    // Keep focus inside: wrap from the last button to the first and back.
    const stops = [this.#deny, this.#allow].filter((b) => !b.disabled);
    if (stops.length === 0) {
      ev.preventDefault();
      this.#root.focus();
      return;
    }
    const first = stops[0];
    const last = stops[stops.length - 1];
    const active = document.activeElement;
    if (ev.shiftKey && (active === first || !stops.includes(active))) {
      ev.preventDefault();
      last.focus();
    } else if (!ev.shiftKey && (active === last || !stops.includes(active))) {
      ev.preventDefault();
      first.focus();
    }
  }

  #close() {
    clearInterval(this.#timer);
    this.#timer = null;
    this.#item = null;
    this.#answerable = false;
    if (!this.#root.open) return;
    this.#root.close();
    const target = this.#returnFocus?.isConnected && !this.#returnFocus.disabled ? this.#returnFocus : this.#fallbackFocus;
    this.#returnFocus = null;
    target?.focus();
  }
}
