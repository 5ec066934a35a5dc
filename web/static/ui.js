// Rendering of the conversation. Every piece of text from the user, the
// model or the gateway goes into the page through textContent (or a DOM
// property), never as HTML.

import { el, srOnly } from "./dom.js";
import { formatRemaining } from "./format.js";
import { ToolTimeline } from "./timeline.js";

/** The transcript: one list item per turn, in turn order, and a "Load
 * earlier" button above it while the gateway has older history. */
export class Transcript {
  #list;
  #scroller;
  #earlier;
  #loadEarlier = null; // resolves to true while still more is left
  #turns = new Map(); // turn number → TurnView

  constructor(list, scroller, earlier) {
    this.#list = list;
    this.#scroller = scroller;
    this.#earlier = earlier;
    earlier.addEventListener("click", () => this.#earlierClicked());
  }

  /** Shows the "Load earlier" button while `load` is set: load() fetches
   * and shows the next older page and resolves to whether more is left. */
  offerEarlier(load) {
    this.#loadEarlier = load;
    this.#earlier.hidden = load === null;
    this.#earlier.disabled = false;
  }

  /** Draws older history entries (oldest first) above what is on screen,
   * keeping the view where the reader is. */
  prependHistory(entries) {
    const s = this.#scroller;
    const fromBottom = s.scrollHeight - s.scrollTop;
    const drawn = new Set();
    for (const entry of Array.isArray(entries) ? entries : []) {
      const n = entry?.turn;
      if (!Number.isInteger(n) || (this.#turns.has(n) && !drawn.has(n))) continue;
      drawn.add(n);
      const view = this.turn(n);
      if (entry.role === "user") view.setUser(String(entry.text ?? ""));
      else if (entry.role === "model") view.setAnswer(String(entry.text ?? ""));
      view.finish();
    }
    s.scrollTop = s.scrollHeight - fromBottom;
  }

  async #earlierClicked() {
    const load = this.#loadEarlier;
    if (load === null) return;
    const button = this.#earlier;
    const label = button.textContent;
    button.disabled = true;
    button.textContent = "Loading…";
    try {
      if (!(await load())) this.offerEarlier(null);
    } catch (err) {
      this.note(`Could not load earlier messages: ${err?.message ?? err}`, "warn");
    } finally {
      button.disabled = false;
      button.textContent = label;
    }
  }

  /** The view of turn `n`, created (in order) when it is not on screen yet. */
  turn(n) {
    let view = this.#turns.get(n);
    if (view === undefined) {
      view = new TurnView(n, (change) => this.#follow(change));
      const next = [...this.#turns.keys()].filter((k) => k > n).sort((a, b) => a - b)[0];
      this.#follow(() => this.#list.insertBefore(view.node, next === undefined ? null : this.#turns.get(next).node));
      this.#turns.set(n, view);
    }
    return view;
  }

  /** The view of turn `n` when it is on screen, else undefined. */
  find(n) {
    return this.#turns.get(n);
  }

  /** Removes everything. */
  reset() {
    this.#turns.clear();
    this.#list.replaceChildren();
    this.offerEarlier(null);
  }

  /** True when nothing is on screen. */
  get empty() {
    return this.#list.childElementCount === 0;
  }

  /**
   * Brings the screen in line with a resumed session's history: turns that
   * finished on screen stay as they are (with their tool timelines); a turn that
   * was still running when the link dropped was cancelled by the gateway, so
   * it is redrawn from the history and marked as interrupted; turns missing
   * from the screen are drawn from the history.
   */
  restore(history) {
    const interrupted = new Set();
    for (const [n, view] of this.#turns) {
      if (!view.finished) {
        view.node.remove();
        this.#turns.delete(n);
        interrupted.add(n);
      }
    }
    const drawn = new Set(this.#turns.keys());
    for (const entry of Array.isArray(history) ? history : []) {
      if (!Number.isInteger(entry?.turn) || drawn.has(entry.turn)) continue;
      const view = this.turn(entry.turn);
      if (entry.role === "user") view.setUser(String(entry.text ?? ""));
      else if (entry.role === "model") view.setAnswer(String(entry.text ?? ""));
    }
    for (const n of this.#turns.keys()) {
      if (drawn.has(n)) continue;
      const view = this.#turns.get(n);
      if (interrupted.has(n)) view.note("The connection dropped during this turn, so it was cancelled.", "info");
      view.finish();
    }
  }

  /** A note outside any turn (a connection event, a refused message). */
  note(text, kind = "info", detail = "") {
    const item = el("li", "turn");
    item.append(noteNode(text, kind, detail));
    this.#follow(() => this.#list.append(item));
    return item;
  }

  #follow(change) {
    const stick = this.#nearBottom();
    change();
    if (stick) this.#stickToBottom();
  }

  #nearBottom() {
    const s = this.#scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
  }

  #stickToBottom() {
    this.#scroller.scrollTop = this.#scroller.scrollHeight;
  }
}

function noteNode(text, kind, detail) {
  const note = el("div", `note ${kind}`);
  if (kind === "error" || kind === "warn") note.setAttribute("role", "alert");
  note.append(el("span", "note-text", text));
  if (detail) note.append(" ", el("code", "note-detail", detail));
  return note;
}

/** One turn: the user's message (or a system line for a turn the gateway
 * started), the tool timeline, the answer and notes. */
export class TurnView {
  node;
  finished = false;
  userText = "";
  #user = null;
  #system = null;
  #tools = null; // ToolTimeline
  #answer = null;
  #answerText = null;
  #notes;
  #follow;

  constructor(n, follow) {
    this.#follow = follow; // runs a change, keeping the view at the bottom if it was there
    this.node = el("li", "turn");
    this.node.dataset.turn = String(n);
    this.#notes = el("div", "notes");
    this.node.append(this.#notes);
  }

  setUser(text) {
    this.userText = text;
    this.#follow(() => {
      if (this.#user === null) {
        this.#user = el("div", "msg user");
        this.#user.append(srOnly("You said: "), el("p", "text"));
        this.node.prepend(this.#user);
      }
      this.#user.querySelector(".text").textContent = text;
    });
  }

  /** Shows a turn the gateway started (e.g. after the user answered a
   * confirmation) as a small system line instead of a user message. */
  setSystem(text) {
    this.#follow(() => {
      if (this.#system === null) {
        this.#system = el("p", "system-line");
        this.node.prepend(this.#system);
      }
      this.#system.textContent = text;
    });
  }

  /** Marks the turn as running: screen readers wait for it to settle. */
  start() {
    this.finished = false;
    this.node.setAttribute("aria-busy", "true");
    this.node.classList.add("running");
  }

  appendAnswer(piece) {
    this.#follow(() => {
      this.#answerNode().textContent += piece;
      this.#answer.classList.add("streaming");
    });
  }

  setAnswer(full) {
    this.#follow(() => {
      this.#answerNode().textContent = full;
      this.#answer.classList.remove("streaming");
    });
  }

  /** Shows the answer assembled so far (transcripts.js): `final` when it
   * is the turn's full final answer. */
  showAnswer(text, final) {
    if (final) {
      this.setAnswer(text);
      return;
    }
    this.#follow(() => {
      this.#answerNode().textContent = text;
      this.#answer.classList.toggle("streaming", !this.finished);
    });
  }

  /** Marks the turn as spoken (its texts are transcriptions). */
  markSpoken() {
    this.node.classList.add("spoken");
  }

  toolCall(id, name, args) {
    this.#follow(() => this.#timeline().call(id, name, args));
  }

  /** tool.args: the arguments of a call announced without them. */
  toolArgs(id, args) {
    this.#follow(() => this.#timeline().args(id, args));
  }

  /** `outcome` is {ok, refused, error, durationMs, result} from tool.result. */
  toolResult(id, name, outcome) {
    this.#follow(() => this.#timeline().result(id, name, outcome));
  }

  /** Marks this turn's call of `tool` that waited for approval with the
   * user's answer (confirm.done `outcome`). */
  confirmOutcome(tool, outcome) {
    this.#tools?.confirmOutcome(tool, outcome);
  }

  /** Shows a note in the turn; `action` is an optional {label, run} button. */
  note(text, kind = "info", detail = "", action = null) {
    const note = noteNode(text, kind, detail);
    if (action) {
      const button = el("button", "link", action.label);
      button.type = "button";
      button.addEventListener("click", () => action.run(button));
      note.append(" ", button);
    }
    this.#follow(() => this.#notes.append(note));
    return note;
  }

  /** Marks the turn as over. */
  finish() {
    this.finished = true;
    this.node.removeAttribute("aria-busy");
    this.node.classList.remove("running");
    this.#answer?.classList.remove("streaming");
  }

  #answerNode() {
    if (this.#answer === null) {
      this.#answer = el("div", "msg model");
      this.#answerText = el("p", "text");
      this.#answer.append(srOnly("Assistant: "), this.#answerText);
      this.node.insertBefore(this.#answer, this.#notes);
    }
    return this.#answerText;
  }

  #timeline() {
    if (this.#tools === null) {
      this.#tools = new ToolTimeline();
      this.node.insertBefore(this.#tools.node, this.#answer ?? this.#notes);
    }
    return this.#tools;
  }
}

/** The tools of the session's mode (session.ready `tools`): a collapsed
 * list in the header, hidden when the gateway does not say. */
export class ToolList {
  #node;
  #summary;
  #list;

  constructor(node) {
    this.#node = node;
    this.#summary = node.querySelector("summary");
    this.#list = node.querySelector("ul");
  }

  show(tools) {
    const list = Array.isArray(tools) ? tools.filter((t) => typeof t?.name === "string" && t.name !== "") : [];
    this.#node.hidden = list.length === 0;
    this.#summary.textContent = `Tools (${list.length})`;
    this.#list.replaceChildren(...list.map((t) => {
      const item = el("li", "tool-info");
      const traits = Array.isArray(t.modes) ? [t.modes.filter((m) => typeof m === "string").join(" · ")] : [];
      if (t.requiresConfirmation === true) traits.push("asks you first");
      if (t.terminal === true) traits.push("ends the turn");
      item.append(el("code", "tool-name", t.name), " ", el("span", "muted", traits.filter(Boolean).join(", ")));
      return item;
    }));
  }
}

/** The connection indicator: a dot and a word. */
export class StatusIndicator {
  #node;
  #text;

  constructor(node, text) {
    this.#node = node;
    this.#text = text;
  }

  set(state, label) {
    this.#node.dataset.state = state;
    this.#text.textContent = label;
  }
}

/** A banner above the transcript: text, an optional detail and button. */
export class Banner {
  #node;

  constructor(node) {
    this.#node = node;
  }

  show(text, detail = "", action = null) {
    const body = el("div", "banner-body");
    body.append(el("strong", "banner-text", text));
    if (detail) body.append(el("span", "banner-detail", detail));
    this.#node.replaceChildren(body);
    if (action) {
      const button = el("button", "secondary", action.label);
      button.type = "button";
      button.addEventListener("click", action.run);
      this.#node.append(button);
    }
    this.#node.hidden = false;
  }

  hide() {
    this.#node.hidden = true;
    this.#node.replaceChildren();
  }
}

/** The banner shown while the user is blocked (`blocked` event): when,
 * why, and a live countdown. It hides itself when the time is up and then
 * runs onEnd(). */
export class BlockBanner {
  #node;
  #onEnd;
  #countdown = null;
  #until = 0;
  #timer = null;

  constructor(node, onEnd) {
    this.#node = node;
    this.#onEnd = onEnd;
  }

  /** True while a block is in force. */
  get active() {
    return this.#timer !== null;
  }

  /** The end of the block in ms since the epoch (0 when none is known). */
  get until() {
    return this.#until;
  }

  /** Shows a block until `until` (ms since the epoch); `headline` replaces
   * the default first sentence. */
  show(until, reason = "", headline = "You are blocked from sending messages.") {
    this.#until = until;
    const body = el("div", "banner-body");
    const detail = el("span", "banner-detail", `Until ${clockTime(until)}`);
    if (reason) detail.append(` · Reason: ${reason}`);
    this.#countdown = el("span", "countdown");
    this.#countdown.setAttribute("role", "timer");
    detail.append(" · Input returns in ", this.#countdown);
    body.append(el("strong", "banner-text", headline), detail);
    this.#node.replaceChildren(body);
    this.#node.hidden = false;
    clearInterval(this.#timer);
    this.#timer = setInterval(() => this.#tick(), 500);
    this.#tick();
  }

  hide() {
    clearInterval(this.#timer);
    this.#timer = null;
    this.#countdown = null;
    this.#node.hidden = true;
    this.#node.replaceChildren();
  }

  #tick() {
    const left = this.#until - Date.now();
    if (left <= 0) {
      this.hide();
      this.#onEnd();
      return;
    }
    this.#countdown.textContent = formatRemaining(left);
  }
}

/** A time of day, with the date when it is not today. */
export function clockTime(ms) {
  const at = new Date(ms);
  const today = new Date().toDateString() === at.toDateString();
  return today
    ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : at.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}
