// The demo chat page, built on the client package (served at /client/):
// wires the client's events to the transcript (ui.js), the confirmations
// (approvals.js), voice (voiceui.js), the tool list and the composer.

import { Client, TurnTexts, gatewayURL } from "/client/index.js";
import { Approvals } from "./approvals.js";
import { parseTime } from "./format.js";
import { Banner, BlockBanner, StatusIndicator, ToolList, Transcript, clockTime } from "./ui.js";
import { VoicePanel } from "./voiceui.js";

const $ = (id) => document.getElementById(id);

const form = $("composer");
const input = $("message");
const sendButton = $("send");
const stopButton = $("stop");
const modelName = $("model-name");
const modeBadge = $("mode");
const transcript = new Transcript($("transcript"), $("scroller"), $("earlier"));
const toolList = new ToolList($("tools"));
const status = new StatusIndicator($("status"), $("status-text"));
const modelBanner = new Banner($("model-banner"));
const connBanner = new Banner($("conn-banner"));
const blockBanner = new BlockBanner($("block-banner"), () => render());
const texts = new TurnTexts();
const INPUT_PLACEHOLDER = input.placeholder;
const VOICE_PLACEHOLDER = "Speak, or type a message…";

const state = {
  connected: false,
  sessionId: null, // the session on screen
  wantNew: false, // the user asked for a new conversation
  resumeRefused: false, // the gateway refused to resume; a new session follows
  pendingText: null, // sent, not yet accepted by turn.start
  voiceTyped: null, // typed in voice while no turn ran: shown with the next turn
  activeTurn: null, // the running turn's number
  lastTurn: 0, // the highest turn seen
  readyTurn: 0, // the turn counter at session.ready: older turns are settled
  cancelRequested: false,
};

// The page's own URL may carry the token (?access_token=, as `gateway
// token` prints it); the gateway's dev mode needs none.
const pageToken = new URLSearchParams(window.location.search).get("access_token");
const client = new Client({
  url: gatewayURL(window.location),
  token: pageToken ? () => pageToken : null,
  storage: window.sessionStorage,
});
client.on("message", handleServerMessage);
client.on("status", handleStatus);
const voice = new VoicePanel({
  client,
  micButton: $("mic"),
  modeButton: $("voice-mode"),
  speaker: $("speaker"),
  note: (text, kind) => transcript.note(text, kind),
  onChange: () => render(),
});
const counters = { messages: {}, transcriptsInput: 0, transcriptsOutput: 0 };
const approvals = new Approvals({ client, transcript, dialogRoot: $("confirm"), fallbackFocus: input });

function handleServerMessage(msg) {
  counters.messages[msg.type] = (counters.messages[msg.type] ?? 0) + 1;
  switch (msg.type) {
    case "session.ready":
      onSessionReady(msg);
      break;
    case "turn.start":
      onTurnStart(msg);
      break;
    case "text.delta":
      if (isTurn(msg.turn)) {
        texts.delta(msg.turn, msg.text);
        showAnswer(msg.turn);
      }
      break;
    case "text.done":
      if (isTurn(msg.turn)) {
        texts.done(msg.turn, msg.text);
        showAnswer(msg.turn);
      } else if (msg.turn === 0) {
        // A profile's greeting: the assistant's first message, outside any turn.
        const greeting = transcript.turn(0);
        greeting.setAnswer(String(msg.text ?? ""));
        greeting.finish();
      }
      break;
    case "transcript.input":
      onTranscript(msg, "input");
      break;
    case "transcript.output":
      onTranscript(msg, "output");
      break;
    case "audio.interrupted":
      break; // the client has flushed the speaker
    case "tool.call":
      if (isTurn(msg.turn)) transcript.turn(msg.turn).toolCall(String(msg.id), String(msg.name ?? "tool"), msg.args);
      break;
    case "tool.args":
      if (isTurn(msg.turn)) transcript.turn(msg.turn).toolArgs(String(msg.id), msg.args);
      break;
    case "tool.result":
      if (isTurn(msg.turn)) {
        transcript.turn(msg.turn).toolResult(String(msg.id), String(msg.name ?? "tool"), {
          ok: msg.ok === true,
          refused: msg.refused === true,
          error: msg.error,
          durationMs: msg.durationMs,
          result: msg.result,
        });
      }
      break;
    case "confirm.request":
      approvals.request(msg);
      break;
    case "confirm.done":
      approvals.done(msg);
      break;
    case "mode":
      onMode(msg);
      break;
    case "blocked":
      onBlocked(msg);
      break;
    case "handoff":
      transcript.note("A person from the team takes over this chat; they will answer here.", "warn", "handoff");
      break;
    case "handoff.pending":
      transcript.note(typeof msg.message === "string" ? msg.message : "Your message was passed on.", "info", "handoff");
      break;
    case "handoff.ended":
      transcript.note("The assistant is back in this chat.", "info", "handoff");
      break;
    case "turn.done":
      onTurnDone(msg);
      break;
    case "error":
      onError(msg);
      break;
    case "auth.ok": // the client schedules the next token refresh
    case "history": // answers loadEarlier's request
    case "pong": // the client counts every frame as a sign of life
      break;
    default:
      console.debug("turnstile: ignoring message type", msg.type);
  }
}

function isTurn(n) {
  return Number.isInteger(n) && n > 0;
}

function onSessionReady(msg) {
  const model = msg.model ?? {};
  modelName.textContent = typeof model.name === "string" ? model.name : "";
  if (model.offline === true) {
    modelBanner.show(
      "Demo mode",
      typeof msg.notice === "string" && msg.notice ? msg.notice : "Answers come from a rule-based demo, not from a real model.",
    );
  } else {
    modelBanner.hide();
  }

  setMode(msg.mode);
  toolList.show(msg.tools);
  texts.clear();
  if (msg.sessionId !== state.sessionId) {
    const lost = state.resumeRefused || (state.sessionId !== null && !state.wantNew);
    transcript.reset();
    state.lastTurn = 0;
    if (lost) transcript.note("The previous conversation could not be resumed (it may have expired), so this is a new one.", "warn");
  }
  state.sessionId = msg.sessionId;
  state.wantNew = false;
  state.resumeRefused = false;
  if (msg.resumed === true) transcript.restore(msg.history);
  transcript.offerEarlier(client.moreHistory ? loadEarlier : null);

  // A turn that was running when the link dropped was cancelled; a text
  // sent but never accepted goes back into the composer.
  const history = Array.isArray(msg.history) ? msg.history : [];
  if (state.pendingText !== null) {
    const accepted = msg.resumed === true && history.some(
      (e) => e?.role === "user" && e.text === state.pendingText && e.turn > state.lastTurn,
    );
    if (!accepted) giveBack(state.pendingText);
  }
  state.lastTurn = Math.max(state.lastTurn, Number.isInteger(msg.turn) ? msg.turn : 0);
  state.readyTurn = Number.isInteger(msg.turn) ? msg.turn : 0;
  state.pendingText = null;
  state.voiceTyped = null;
  state.activeTurn = null;
  state.cancelRequested = false;
  approvals.sessionReady(msg);
  if (msg.mode === "voice" && msg.resumed !== true) transcript.note("Voice mode: press the microphone to talk.", "info");
  render();
}

function onTurnStart(msg) {
  if (!isTurn(msg.turn)) return;
  const view = transcript.turn(msg.turn);
  if (msg.kind === "confirmation") {
    // The gateway started this turn to tell the model the user's answer;
    // its text is addressed to the model, so show what the user did. A text
    // the user sent meanwhile still waits for its own turn.start.
    const answer = approvals.takeAnswer();
    view.setSystem(answer ? `You ${answer.outcome === "approved" ? "approved" : "declined"} ${answer.tool}.` : String(msg.text ?? ""));
  } else {
    // In voice, the words may come later as transcript.input pieces.
    texts.start(msg.turn, msg.text);
    const said = texts.user(msg.turn);
    if (said) view.setUser(said);
    state.pendingText = null;
    if (state.voiceTyped !== null) {
      addTyped(msg.turn, state.voiceTyped);
      state.voiceTyped = null;
    }
  }
  view.start();
  state.activeTurn = msg.turn;
  state.lastTurn = Math.max(state.lastTurn, msg.turn);
  state.cancelRequested = false;
  render();
}

// turn.done reasons without a note: end_turn, terminal_tool and finish all
// end with the final answer, which text.done has already shown.
const REASON_TEXT = {
  max_iterations: "Stopped: the model kept calling tools without reaching an answer.",
  interrupted: "Interrupted.",
};

// A piece of a voice turn's transcription. Pieces are assembled per turn
// (transcripts.js), so they may arrive before turn.start, after the model's
// answer, or after turn.done.
function onTranscript(msg, which) {
  if (!isTurn(msg.turn) || msg.turn <= state.readyTurn) return;
  const view = transcript.turn(msg.turn);
  view.markSpoken();
  state.lastTurn = Math.max(state.lastTurn, msg.turn);
  if (which === "input") {
    counters.transcriptsInput++;
    texts.input(msg.turn, msg.text);
    const said = texts.user(msg.turn);
    if (said) view.setUser(said);
  } else {
    counters.transcriptsOutput++;
    texts.output(msg.turn, msg.text);
    showAnswer(msg.turn);
  }
}

function showAnswer(turn) {
  const { text, final } = texts.model(turn);
  if (text || final) transcript.turn(turn).showAnswer(text, final);
}

function onTurnDone(msg) {
  if (isTurn(msg.turn)) {
    const view = transcript.turn(msg.turn);
    const text = REASON_TEXT[msg.reason];
    // An interruption the user asked for was already noted by its error event.
    if (text && !(msg.reason === "interrupted" && view.node.querySelector(".note.cancelled"))) view.note(text, "info");
    view.finish();
  }
  if (state.activeTurn === null || msg.turn === state.activeTurn) {
    state.activeTurn = null;
    state.cancelRequested = false;
  }
  render();
}

function onError(msg) {
  const code = String(msg.code ?? "error");
  const message = String(msg.message ?? "Something went wrong.");
  const retryable = msg.retryable === true;

  if (voice.answersSwitch(code)) return; // noted by the switchFailed event
  if (code === "resume_refused") {
    state.resumeRefused = true; // noted when the new session is ready
    return;
  }
  if (code === "confirmation_unknown" || code === "confirmation_expired") {
    approvals.refused(code, message);
    return;
  }
  // Events of a turn carry its number, so an error without one while a text
  // awaits turn.start refuses that text: hand it back for editing.
  if (code === "turn_in_progress" || (state.pendingText !== null && !isTurn(msg.turn) && code !== "turn_cancelled")) {
    giveBack(state.pendingText);
    state.pendingText = null;
    const text = code === "turn_in_progress" ? "Wait for the current answer to finish, then send again." : message;
    transcript.note(text, retryable ? "warn" : "error", code);
    render();
    return;
  }
  if (code === "turn_cancelled") {
    const text = state.cancelRequested ? "Stopped." : `Interrupted: ${message}`;
    if (isTurn(msg.turn)) transcript.turn(msg.turn).note(text, "info cancelled");
    else transcript.note(text, "info cancelled");
    return;
  }
  const kind = retryable ? "warn" : "error";
  const text = code === "rate_limited"
    ? "You are sending faster than the gateway allows: wait a moment, then try again."
    : retryable ? `${message} (temporary: you can try again)` : message;
  if (!isTurn(msg.turn)) {
    transcript.note(text, kind, code);
    return;
  }
  const view = transcript.turn(msg.turn);
  const retry = retryable && view.userText ? { label: "Retry", run: (button) => retryTurn(view.userText, button) } : null;
  view.note(text, kind, code, retry);
}

function retryTurn(text, button) {
  if (sendText(text)) button.disabled = true;
}

// Older history, asked for by the "Load earlier" button.
async function loadEarlier() {
  const page = await client.loadHistory({ limit: 50 });
  transcript.prependHistory(page.entries);
  return page.more;
}

function handleStatus(s) {
  state.connected = s.state === "ready";
  if (!state.connected) approvals.disconnected();
  switch (s.state) {
    case "connecting":
      status.set("connecting", "Connecting…");
      break;
    case "ready":
      status.set("connected", "Connected");
      connBanner.hide();
      break;
    case "reconnecting":
      status.set("reconnecting", "Reconnecting…");
      if (!s.everConnected && s.attempt >= 3) {
        connBanner.show(
          "Cannot reach the gateway.",
          "It may be down, or it refused the access token in the page address. Still trying…",
        );
      }
      break;
    case "closed": {
      status.set("stopped", s.code === 4003 ? "Blocked" : "Disconnected");
      let detail = s.reason ? `Gateway said: “${s.reason}” (code ${s.code})` : s.code ? `Code ${s.code}` : "";
      if (s.code === 4003 && blockBanner.until > Date.now()) detail = `You can reconnect after ${clockTime(blockBanner.until)}.`;
      connBanner.show(s.message, detail, { label: "Reconnect", run: () => client.connect() });
      break;
    }
  }
  render();
}

function render() {
  // In voice a typed message may join the running turn.
  const busy = state.pendingText !== null || (state.activeTurn !== null && voice.mode !== "voice");
  const blocked = blockBanner.active;
  sendButton.disabled = !state.connected || busy || blocked;
  stopButton.disabled = !state.connected || state.activeTurn === null || state.cancelRequested;
  form.setAttribute("aria-busy", String(busy));
  input.disabled = blocked;
  input.placeholder = blocked
    ? `You can write again after ${clockTime(blockBanner.until)}.`
    : voice.mode === "voice" ? VOICE_PLACEHOLDER : INPUT_PLACEHOLDER;
  voice.blocked = blocked;
}

function setMode(mode) {
  const known = mode === "text" || mode === "voice";
  modeBadge.hidden = !known;
  modeBadge.dataset.mode = known ? mode : "";
  modeBadge.textContent = mode === "voice" ? "Voice mode" : known ? "Text mode" : "";
}

const MODE_TEXT = {
  voice: {
    client: "Voice mode: press the microphone to talk.",
    start_voice_session: "The assistant switched to voice mode: press the microphone to talk.",
    "session.start": "Voice mode: press the microphone to talk.",
  },
  text: {
    client: "Back to text mode.",
    end_voice_session: "The assistant ended the voice conversation: back to text mode.",
    upstream_lost: "The voice connection was lost: back to text mode. Your conversation is kept.",
  },
};

function onMode(msg) {
  const mode = String(msg.mode ?? "");
  const reason = String(msg.reason ?? "");
  setMode(mode);
  // The new mode declares its own tools (none: the field is left out).
  toolList.show(msg.tools);
  let text = MODE_TEXT[mode]?.[reason] ?? `The session switched to ${mode} mode${reason ? ` (${reason})` : ""}.`;
  if (mode === "voice" && voice.micOn) text = "Voice mode: listening.";
  transcript.note(text, reason === "upstream_lost" ? "warn" : "info");
  render();
}

function onBlocked(msg) {
  const until = parseTime(msg.until);
  if (!Number.isFinite(until) || until <= Date.now()) return;
  const reason = typeof msg.reason === "string" ? msg.reason : "";
  blockBanner.show(until, reason);
  transcript.note(`The assistant paused this chat: you can write again after ${clockTime(until)}.`, "warn", "blocked");
  render();
}

// Control characters other than newline and tab, removed before sending (the
// gateway strips them too, keeping tab, newline and carriage return).
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;

function sendText(raw) {
  const text = raw.replace(CONTROL, "").trim();
  if (!text || !state.connected || blockBanner.active) return false;
  if (voice.mode === "voice") return sendVoiceText(text);
  if (state.pendingText !== null || state.activeTurn !== null) return false;
  if (!client.sendText(text)) return false;
  state.pendingText = text;
  render();
  return true;
}

// In voice the gateway passes a typed message to the model as part of the
// running turn's input (or starts a turn for it) and does not echo it, so
// the page shows it itself.
function sendVoiceText(text) {
  if (!client.sendText(text)) return false;
  if (state.activeTurn !== null) addTyped(state.activeTurn, text);
  else state.voiceTyped = text;
  return true;
}

function addTyped(turn, text) {
  texts.input(turn, texts.user(turn) ? ` ${text}` : text);
  transcript.turn(turn).setUser(texts.user(turn));
}

function giveBack(text) {
  if (text && !input.value.trim()) {
    input.value = text;
    autosize();
  }
}

function stopTurn() {
  if (state.activeTurn === null || state.cancelRequested) return;
  if (client.cancelTurn()) {
    state.cancelRequested = true;
    render();
  }
}

const MAX_INPUT_PX = 200;

// Grows the composer with its text up to MAX_INPUT_PX, then scrolls.
function autosize() {
  input.style.height = "auto";
  const borders = input.offsetHeight - input.clientHeight;
  const wanted = input.scrollHeight + borders;
  input.style.height = `${Math.min(wanted, MAX_INPUT_PX)}px`;
  input.style.overflowY = wanted > MAX_INPUT_PX ? "auto" : "hidden";
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  if (sendText(input.value)) {
    input.value = "";
    autosize();
  }
  input.focus();
});

input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    form.requestSubmit();
  } else if (ev.key === "Escape") {
    stopTurn();
  }
});
input.addEventListener("input", autosize);
stopButton.addEventListener("click", stopTurn);

$("new-chat").addEventListener("click", () => {
  state.wantNew = true;
  state.sessionId = null;
  state.pendingText = null;
  state.activeTurn = null;
  approvals.clear();
  texts.clear();
  transcript.reset();
  toolList.show([]);
  client.newSession();
  input.focus();
});

window.addEventListener("online", () => client.retryNow());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") client.retryNow();
});

// ?debug=1 exposes live counters for browser tests and people debugging
// audio: window.__turnstile.
if (new URLSearchParams(window.location.search).get("debug") === "1") {
  const view = voice.debugView();
  Object.defineProperties(view, {
    messages: { get: () => ({ ...counters.messages }), enumerable: true },
    transcriptsInput: { get: () => counters.transcriptsInput, enumerable: true },
    transcriptsOutput: { get: () => counters.transcriptsOutput, enumerable: true },
    connected: { get: () => state.connected, enumerable: true },
    turnText: { value: (n) => ({ user: texts.user(n), model: texts.model(n).text }) },
  });
  window.__turnstile = view;
}

autosize();
render();
client.connect();
