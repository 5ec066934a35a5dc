// The declarations and the modules name the same things.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

function declared(file) {
  const dts = readFileSync(new URL(`../${file}`, import.meta.url), "utf8");
  return [...dts.matchAll(/^export declare (?:const|function|class) (\w+)/gm)].map((m) => m[1]).sort();
}

test("index.d.ts declares exactly what index.js exports", async () => {
  const mod = await import("../index.js");
  assert.deepEqual(declared("index.d.ts"), Object.keys(mod).sort());
});

test("react.d.ts declares exactly what react.js exports", async () => {
  const mod = await import("../react.js");
  assert.deepEqual(declared("react.d.ts"), Object.keys(mod).sort());
});

test("no module but react.js imports React", () => {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.peerDependenciesMeta.react.optional, true);
  for (const name of ["index", "client", "close", "token", "voice", "voicelink", "devices", "audio", "playback", "transcripts", "confirm", "mic-worklet", "player-worklet"]) {
    const src = readFileSync(new URL(`../${name}.js`, import.meta.url), "utf8");
    assert.doesNotMatch(src, /from\s+["']react/, `${name}.js imports React`);
  }
});
