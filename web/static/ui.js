// Rendering of the conversation. Every piece of text from the user, the
// model or the gateway goes into the page through textContent (or a DOM
// property), never as HTML.

/** Creates an element with a class and, optionally, text. */
export function el(tag, className = "", text = "") {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}

function srOnly(text) {
  return el("span", "sr-only", text);
}

/** The transcript: one list item per turn, in turn order. */
export class Transcript {
  #list;
  #scroller;
  #turns = new Map(); // turn number → TurnView

  constructor(list, scroller) {
    this.#list = list;
    this.#scroller = scroller;
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

  /** Removes everything. */
  reset() {
    this.#turns.clear();
    this.#list.replaceChildren();
  }

  /** True when nothing is on screen. */
  get empty() {
    return this.#list.childElementCount === 0;
  }

  /**
   * Brings the screen in line with a resumed session's history: turns that
   * finished on screen stay as they are (with their tool chips); a turn that
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

/** One turn: the user's message, tool chips, the answer and notes. */
export class TurnView {
  node;
  finished = false;
  userText = "";
  #user = null;
  #tools = null;
  #chips = new Map(); // call id → chip
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

  toolCall(id, name, args) {
    this.#follow(() => {
      const chip = this.#chip(id, name);
      chip.className = "chip running";
      chip.querySelector(".chip-status").textContent = "running…";
      if (args !== undefined) chip.title = `${name} ${JSON.stringify(args)}`;
    });
  }

  toolResult(id, name, ok, error, durationMs) {
    this.#follow(() => this.#settleChip(this.#chip(id, name), ok, error, durationMs));
  }

  #settleChip(chip, ok, error, durationMs) {
    const ms = Number.isFinite(durationMs) ? `${Math.round(durationMs)} ms` : "";
    const status = chip.querySelector(".chip-status");
    if (ok) {
      chip.className = "chip ok";
      status.textContent = ms ? `done in ${ms}` : "done";
    } else {
      chip.className = "chip failed";
      const type = String(error?.type ?? "ERROR");
      const message = String(error?.message ?? "");
      status.textContent = message ? `${type}: ${message}` : type;
      if (ms) chip.title = `${chip.title ? chip.title + "\n" : ""}after ${ms}`;
    }
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

  #chip(id, name) {
    let chip = this.#chips.get(id);
    if (chip === undefined) {
      if (this.#tools === null) {
        this.#tools = el("ul", "tools");
        this.#tools.setAttribute("aria-label", "Tool calls");
        this.node.insertBefore(this.#tools, this.#answer ?? this.#notes);
      }
      chip = el("li", "chip");
      chip.append(el("span", "chip-name", String(name)), srOnly(": "), el("span", "chip-status"));
      this.#tools.append(chip);
      this.#chips.set(id, chip);
    }
    return chip;
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
