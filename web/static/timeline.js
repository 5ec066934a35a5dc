// A turn's tool timeline: one row per tool call, in the order the calls
// entered the gateway's pipeline, each with its (redacted) arguments and
// its outcome, and a summary line with the totals. Text goes in through
// textContent only.

import { compactArgs, formatDuration } from "./format.js";
import { el } from "./dom.js";

// The outcomes a row can show; the row's data-state, styled in style.css.
const RUNNING = "running";
const OK = "ok";
const REFUSED = "refused"; // the gateway's policy answered without running the tool
const FAILED = "failed"; // the tool ran and failed
const AWAITING = "awaiting"; // refused until the user approves it

const CONFIRM_OUTCOME_TEXT = {
  approved: "you approved it",
  denied: "you declined it",
  expired: "approval timed out",
};

export class ToolTimeline {
  /** The element to put in the turn (a <details>, open). */
  node;
  #summary;
  #list;
  #calls = new Map(); // call id → { row, name, state, durationMs }

  constructor() {
    this.node = el("details", "timeline");
    this.node.open = true;
    this.#summary = el("summary", "timeline-summary");
    this.#list = el("ol", "timeline-rows");
    this.#list.setAttribute("aria-label", "Tool calls");
    this.node.append(this.#summary, this.#list);
  }

  /** A tool.call: a new running row (or the existing one for `id`).
   * Without `args` the model's arguments are still streaming: tool.args
   * brings them. */
  call(id, name, args) {
    const call = this.#call(id, name);
    if (args === undefined) this.#showArgs(call, undefined, "…");
    else this.#showArgs(call, args, compactArgs(args));
    this.#set(call, RUNNING, "running…");
  }

  /** A tool.args: the arguments of a call announced without them. */
  args(id, args) {
    const call = this.#call(id, this.#calls.get(id)?.name ?? "tool");
    this.#showArgs(call, args, compactArgs(args));
  }

  /** A tool.result: the row's outcome, and the allow-listed fields of the
   * tool's output when the gateway sends them. */
  result(id, name, { ok, refused, error, durationMs, result }) {
    const call = this.#call(id, name);
    call.durationMs = Number.isFinite(durationMs) && durationMs >= 0 ? durationMs : null;
    const took = formatDuration(call.durationMs);
    call.row.querySelector(".tool-result")?.remove();
    if (result !== null && typeof result === "object" && Object.keys(result).length > 0) {
      const line = el("p", "tool-result", `→ ${compactArgs(result)}`);
      line.title = JSON.stringify(result);
      call.row.append(line);
    }
    if (ok) {
      this.#set(call, OK, took || "done");
      this.#setError(call, null);
      return;
    }
    const type = typeof error?.type === "string" && error.type ? error.type : "ERROR";
    const message = typeof error?.message === "string" ? error.message : "";
    if (refused && type === "CONFIRMATION_REQUIRED") {
      this.#set(call, AWAITING, "needs your approval");
    } else if (refused) {
      this.#set(call, REFUSED, "refused by policy");
    } else {
      this.#set(call, FAILED, took ? `failed after ${took}` : "failed");
    }
    this.#setError(call, { type, message });
  }

  /** The user's answer (confirm.done `outcome`) to the latest call of
   * `tool` that waits for approval; false when there is none. */
  confirmOutcome(tool, outcome) {
    const waiting = [...this.#calls.values()].filter((c) => c.state === AWAITING && c.name === tool).at(-1);
    if (waiting === undefined) return false;
    this.#set(waiting, REFUSED, `needed approval: ${CONFIRM_OUTCOME_TEXT[outcome] ?? outcome}`);
    return true;
  }

  #call(id, name) {
    let call = this.#calls.get(id);
    if (call === undefined) {
      const row = el("li", "tool");
      row.append(
        el("span", "tool-icon"),
        el("code", "tool-name", name),
        el("span", "tool-args"),
        el("span", "tool-status"),
      );
      row.firstChild.setAttribute("aria-hidden", "true");
      call = { row, name, state: RUNNING, durationMs: null };
      this.#calls.set(id, call);
      this.#list.append(row);
    }
    return call;
  }

  #showArgs(call, args, text) {
    const node = call.row.querySelector(".tool-args");
    node.textContent = text;
    node.title = args === undefined ? "" : JSON.stringify(args);
  }

  #set(call, state, status) {
    call.state = state;
    call.row.dataset.state = state;
    call.row.querySelector(".tool-status").textContent = status;
    this.#summarize();
  }

  #setError(call, error) {
    call.row.querySelector(".tool-error")?.remove();
    if (error === null) return;
    const line = el("p", "tool-error");
    line.append(el("code", "tool-error-type", error.type));
    if (error.message) line.append(" ", el("span", "", error.message));
    call.row.append(line);
  }

  #summarize() {
    const calls = [...this.#calls.values()];
    const count = (...states) => calls.filter((c) => states.includes(c.state)).length;
    const parts = [`${calls.length} tool ${calls.length === 1 ? "call" : "calls"}`];
    const running = count(RUNNING);
    const refused = count(REFUSED, AWAITING);
    const failed = count(FAILED);
    if (running) parts.push(`${running} running`);
    if (refused) parts.push(`${refused} refused`);
    if (failed) parts.push(`${failed} failed`);
    // Refused calls never ran: their time is not tool time.
    const timed = calls.filter((c) => c.durationMs !== null && (c.state === OK || c.state === FAILED));
    if (timed.length > 0) parts.push(`${formatDuration(timed.reduce((sum, c) => sum + c.durationMs, 0))} in tools`);
    this.#summary.textContent = parts.join(" · ");
    this.node.dataset.state = running ? RUNNING : failed ? FAILED : refused ? REFUSED : OK;
  }
}
