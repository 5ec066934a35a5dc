// The page's side of confirmations (docs/protocol.md, "Confirmations"):
// queues confirm.request events, shows the oldest in the dialog while the
// session is live, sends the user's `confirm` answer, and closes each
// request on its confirm.done (from this tab or any other), on expiry, or
// when a reconnect no longer lists it.

import { ConfirmQueue } from "/client/index.js";
import { ConfirmDialog } from "./dialog.js";

// How many answered outcomes to remember for turns that have not started.
const ANSWERED_MAX = 8;

export class Approvals {
  #client;
  #transcript;
  #queue;
  #dialog;
  #live = false;
  #timer = null;
  #answered = []; // {tool, outcome} from confirm.done, awaiting their turn.start

  /** `client` is the Client, `transcript` the Transcript, `dialogRoot`
   * the <dialog> element; focus returns to `fallbackFocus` when no better
   * place is left after the dialog closes. */
  constructor({ client, transcript, dialogRoot, fallbackFocus }) {
    this.#client = client;
    this.#transcript = transcript;
    this.#dialog = new ConfirmDialog(dialogRoot, { onAnswer: (token, approve) => this.#answer(token, approve), fallbackFocus });
    this.#queue = new ConfirmQueue({ onChange: () => this.#show() });
  }

  /** A session is ready: what it lists as pending is what waits (nothing
   * for a new session). */
  sessionReady(msg) {
    this.#answered = [];
    this.#live = true;
    this.#queue.replace(msg.resumed === true ? msg.pendingConfirmations : []);
  }

  /** The connection is down: answers cannot go out until the next
   * session.ready, so the dialog closes (a modal with dead buttons would
   * also keep the user from the Reconnect button). */
  disconnected() {
    this.#live = false;
    this.#show();
  }

  /** The user started a new conversation. */
  clear() {
    this.#answered = [];
    this.#queue.clear();
  }

  /** A confirm.request. */
  request(msg) {
    if (this.#queue.add(msg) === "expired") {
      const tool = typeof msg.tool === "string" && msg.tool ? msg.tool : "a tool";
      this.#note(msg.turn, `A request to run ${tool} arrived after it had expired, so it was not run.`, "warn");
    }
  }

  /** A confirm.done. */
  done(msg) {
    const item = this.#queue.settle(msg.token);
    const tool = typeof msg.tool === "string" && msg.tool ? msg.tool : item?.tool ?? "the tool";
    const outcome = String(msg.outcome ?? "");
    if (outcome === "approved" || outcome === "denied") {
      this.#answered.push({ tool, outcome });
      if (this.#answered.length > ANSWERED_MAX) this.#answered.shift();
    } else if (outcome === "expired" && item !== null) {
      // (Without the item, its expiry was noted already.)
      this.#note(item.turn, `The request to run ${tool} expired, so it was not run.`, "info");
    }
    if (item !== null) this.#outcome(item.turn, tool, outcome);
  }

  /** An error `confirmation_unknown` or `confirmation_expired`: the gateway
   * refused the answer just sent, so that request is over. */
  refused(code, message) {
    const tool = this.#queue.dropSent()[0]?.tool;
    const text = code === "confirmation_expired"
      ? `Too late: the request${tool ? ` to run ${tool}` : ""} had expired, so it was not run.`
      : `That confirmation request is no longer open (it was already answered or has ended): ${message}`;
    this.#transcript.note(text, "warn", code);
  }

  /** The oldest answer whose turn has not started: {tool, outcome}, or
   * undefined. turn.start with kind "confirmation" takes it. */
  takeAnswer() {
    return this.#answered.shift();
  }

  #answer(token, approve) {
    const fields = this.#queue.answer(token, approve);
    if (fields === null) return;
    if (!this.#client.confirm(fields.token, fields.approve)) this.#queue.unsend(token);
  }

  #show() {
    this.#dialog.show(this.#live ? this.#queue.current : null, Math.max(0, this.#queue.length - 1));
    clearTimeout(this.#timer);
    const wait = this.#queue.nextExpiryIn();
    this.#timer = wait === null ? null : setTimeout(() => this.#expire(), wait + 50);
  }

  #expire() {
    for (const item of this.#queue.expire()) {
      this.#note(item.turn, `The request to run ${item.tool} expired, so it was not run.`, "info");
      this.#outcome(item.turn, item.tool, "expired");
    }
  }

  #outcome(turn, tool, outcome) {
    if (Number.isInteger(turn)) this.#transcript.find(turn)?.confirmOutcome(tool, outcome);
  }

  #note(turn, text, kind) {
    const view = Number.isInteger(turn) ? this.#transcript.find(turn) : undefined;
    if (view) view.note(text, kind);
    else this.#transcript.note(text, kind);
  }
}
