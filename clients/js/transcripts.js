// Assembly of each turn's two texts, what the user said and what the model
// answered, from events that may arrive in any order relative to each other
// (docs/protocol.md, "Voice"; Gemini gives no ordering guarantee between
// transcriptions and model output). Every piece carries its turn number, so
// pieces are kept per turn: a late input transcription still lands in its
// own turn's user bubble, after the model has started (or finished)
// answering, or after the next turn has begun. No DOM: Node tests import it.

// How many turns to remember; older ones are finished on screen.
const KEEP_TURNS = 64;

export class TurnTexts {
  #turns = new Map(); // turn number → {start, input, streamed, final}

  /** turn.start: `text` is the typed message, or in voice what the
   * gateway had of the user's words when the turn began (often empty). */
  start(turn, text) {
    this.#turn(turn).start = String(text ?? "");
  }

  /** transcript.input: a piece of what the user said. */
  input(turn, piece) {
    const t = this.#turn(turn);
    t.input += String(piece ?? "");
    t.spoken = true;
  }

  /** transcript.output: a piece of what the model says. */
  output(turn, piece) {
    const t = this.#turn(turn);
    t.streamed += String(piece ?? "");
    t.spoken = true;
  }

  /** text.delta: a piece of streamed model text. */
  delta(turn, piece) {
    this.#turn(turn).streamed += String(piece ?? "");
  }

  /** text.done: the turn's full final answer; later pieces no longer
   * change what is shown. */
  done(turn, text) {
    this.#turn(turn).final = String(text ?? "");
  }

  /** What the user said or typed in `turn` ("" when nothing yet). When
   * turn.start carried the first words and the transcription repeats them,
   * they show once. */
  user(turn) {
    const t = this.#turns.get(turn);
    if (t === undefined) return "";
    if (t.input.trim() === "") return t.start;
    if (t.start === "" || t.input.trimStart().startsWith(t.start.trim())) return t.input;
    return t.start + t.input;
  }

  /** The model's answer in `turn`: {text, final}. */
  model(turn) {
    const t = this.#turns.get(turn);
    if (t === undefined) return { text: "", final: false };
    return t.final === null ? { text: t.streamed, final: false } : { text: t.final, final: true };
  }

  /** True when a transcription arrived for `turn` (a spoken turn). */
  spoken(turn) {
    return this.#turns.get(turn)?.spoken === true;
  }

  /** Forgets everything (a new or resumed session). */
  clear() {
    this.#turns.clear();
  }

  #turn(n) {
    let t = this.#turns.get(n);
    if (t === undefined) {
      t = { start: "", input: "", streamed: "", final: null, spoken: false };
      this.#turns.set(n, t);
      if (this.#turns.size > KEEP_TURNS) this.#turns.delete(Math.min(...this.#turns.keys()));
    }
    return t;
  }
}
