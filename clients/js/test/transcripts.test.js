// Each turn's texts are assembled from pieces that may come in any order.

import assert from "node:assert/strict";
import { test } from "node:test";

import { TurnTexts } from "../index.js";

test("transcripts are assembled by turn whatever their order", () => {
  const texts = new TurnTexts();
  const events = [
    ["output", 1, "Hel"], // the model's words before the user's transcription
    ["start", 1, ""],
    ["input", 2, "And "], // the next turn's words before turn 1 is over
    ["output", 1, "lo!"],
    ["input", 1, "Hi "],
    ["input", 1, "there"],
    ["done", 1, "Hello!"],
    ["output", 1, " (late)"], // after the final answer: not shown
    ["input", 1, "."], // a late input piece still lands in turn 1
    ["input", 2, "you?"],
    ["start", 2, ""],
    ["start", 3, "typed in voice"], // a typed message: no transcription
    ["delta", 3, "Sure"],
    ["start", 4, "What"],
    ["input", 4, "What time is it"], // the gateway repeated the first words
    ["start", 5, "Book"],
    ["input", 5, " a table"], // or sent only the rest
  ];
  for (const [kind, turn, text] of events) texts[kind](turn, text);
  const got = Object.fromEntries([1, 2, 3, 4, 5].map((n) => [n, { user: texts.user(n), ...texts.model(n), spoken: texts.spoken(n) }]));
  assert.deepEqual(got, {
    1: { user: "Hi there.", text: "Hello!", final: true, spoken: true },
    2: { user: "And you?", text: "", final: false, spoken: true },
    3: { user: "typed in voice", text: "Sure", final: false, spoken: false },
    4: { user: "What time is it", text: "", final: false, spoken: true },
    5: { user: "Book a table", text: "", final: false, spoken: true },
  });
  texts.clear();
  assert.equal(texts.user(1), "");
});
