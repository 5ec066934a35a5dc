// Voice over a real connection with a synthetic microphone (a 1 kHz tone at
// 48 kHz through the same conversion the microphone worklet runs) and a
// speaker that records what it is given: audio goes out only in voice mode,
// barge-in flushes the speaker, and mode switches time out or fail cleanly.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Downsampler, FrameAssembler, connect } from "../index.js";
import { tone, zeroCrossings } from "./dsp.js";
import { ClientWebSocket, record, until, useGateway } from "./gateway.js";

/** Devices for the client's `audio` option: the microphone plays 40 ms of
 * a 1 kHz sine every 40 ms while started. */
function syntheticAudio() {
  const log = { pushed: [], flushes: 0, micStarts: 0, micStops: 0 };
  const make = ({ onFrame, onReport }) => {
    let timer = null;
    let down;
    let frames;
    let t = 0;
    const capture = () => {
      for (let q = 0; q < 15; q++) {
        const chunk = new Float32Array(128);
        for (let i = 0; i < 128; i++, t++) chunk[i] = 0.5 * Math.sin((2 * Math.PI * 1000 * t) / 48_000);
        for (const f of frames.push(down.process(chunk))) onFrame(f);
      }
    };
    return {
      microphone: {
        sampleRate: 48_000,
        get active() {
          return timer !== null;
        },
        async start() {
          log.micStarts++;
          down = new Downsampler(48_000);
          frames = new FrameAssembler();
          timer = setInterval(capture, 40);
        },
        async stop() {
          log.micStops++;
          clearInterval(timer);
          timer = null;
          return frames.flush();
        },
      },
      speaker: {
        push(buf) {
          log.pushed.push(buf.byteLength);
          onReport({ state: "buffering", played: 0, buffered: 0, underruns: 0, dropped: 0, flushed: 0 });
        },
        flush() {
          log.flushes++;
        },
      },
      resume() {},
      suspended: false,
    };
  };
  return { make, log };
}

const { gw, clients } = useGateway();

async function session(options = {}) {
  const audio = syntheticAudio();
  const client = connect({ url: gw.url, WebSocket: ClientWebSocket, audio: audio.make, backoff: { minMs: 20, maxMs: 50 }, ...options });
  clients.push(client);
  const peer = await gw.peer();
  assert.equal((await peer.next()).type, "session.start");
  peer.ready();
  await until("ready", () => client.ready);
  return { client, peer, log: audio.log };
}

const pcm16 = (buf) => Array.from({ length: buf.length / 2 }, (_, i) => buf.readInt16LE(2 * i) / 32768);

test("microphone audio goes out only in voice mode, as 16 kHz PCM16 frames of the tone", async () => {
  const { client, peer, log } = await session();
  const voiceEvents = record(client, "voice");
  assert.equal(await client.startVoice(), true);
  assert.equal(client.voice.mic, "waiting");
  assert.equal(client.voice.switching, "voice");
  assert.deepEqual(await peer.next(), { type: "voice.start" });
  assert.equal(await peer.maybeNext(300), undefined, "nothing before the switch");

  peer.send({ type: "mode", mode: "voice", reason: "client" });
  await until("mic on", () => client.voice.mic === "on");
  assert.ok(client.voice.framesSent >= 3, "frames captured while waiting go out first: the first word is kept");
  const audio = [];
  const sizes = [];
  while (audio.reduce((n, b) => n + b.length, 0) < 32000) {
    const f = await peer.next();
    assert.ok(f && "binary" in f, `in voice the client sent ${JSON.stringify(f)}`);
    audio.push(f.binary);
    sizes.push(f.binary.length);
  }
  assert.ok(sizes.every((n) => n === 1280), `frame sizes ${sizes}`);
  const pcm = pcm16(Buffer.concat(audio));
  assert.ok(Math.abs(tone(pcm.slice(160, 8160), 1000, 16000) - 0.5) < 0.01, "not 16 kHz PCM16 LE of the tone");
  const zc = zeroCrossings(pcm.slice(160, 8160));
  assert.ok(zc >= 998 && zc <= 1002, `${zc} zero crossings`);
  assert.ok(voiceEvents.some(([, v]) => v.mic === "on" && v.mode === "voice"));

  // The model speaks, then the user barges in.
  const speech = Buffer.alloc(9600);
  peer.sendBinary(speech.subarray(0, 4800));
  peer.send({ type: "turn.start", turn: 1, text: "" });
  peer.send({ type: "transcript.output", turn: 1, text: "Hello" });
  peer.sendBinary(speech.subarray(4800));
  let atInterruption = null;
  client.on("audio.interrupted", () => {
    atInterruption = { pushed: log.pushed.reduce((a, b) => a + b, 0), flushes: log.flushes };
    client.voice.stopMic();
  });
  peer.send({ type: "audio.interrupted", turn: 1 });
  await until("interrupted", () => atInterruption !== null);
  assert.deepEqual(atInterruption, { pushed: 9600, flushes: 1 }, "all speech reached the speaker, in order, then it was flushed");
  assert.equal(client.voice.interruptions, 1);

  // Stopping the microphone: the frames in flight, the partial last one, then audio.end.
  for (;;) {
    const f = await peer.next();
    if (!("binary" in f)) {
      assert.deepEqual(f, { type: "audio.end" });
      break;
    }
    assert.ok(f.binary.length > 0 && f.binary.length <= 1280 && f.binary.length % 2 === 0, `frame of ${f.binary.length} bytes`);
    audio.push(f.binary);
  }
  assert.equal(client.voice.bytesSent, audio.reduce((n, b) => n + b.length, 0), "every frame sent arrived, none after audio.end");
  assert.equal(client.voice.mic, "off");
  assert.equal(client.voice.audioEnds, 1);

  peer.send({ type: "mode", mode: "text", reason: "end_voice_session" });
  await until("text", () => client.voice.mode === "text");
  assert.equal(await peer.maybeNext(300), undefined, "nothing after the switch to text");
});

test("the session leaving voice stops the microphone without audio.end", async () => {
  const { client, peer, log } = await session();
  peer.send({ type: "mode", mode: "voice", reason: "client" });
  await until("voice", () => client.voice.mode === "voice");
  assert.equal(await client.voice.startMic(), true);
  assert.ok("binary" in (await peer.next()));
  peer.send({ type: "mode", mode: "text", reason: "upstream_lost" });
  await until("mic off", () => client.voice.mic === "off" && log.micStops === 1);
  for (let f = await peer.maybeNext(200); f !== undefined; f = await peer.maybeNext(200)) {
    assert.ok("binary" in f, `after leaving voice the client sent ${JSON.stringify(f)}`);
  }
});

test("a switch the gateway refuses, or never answers, is given up and the microphone stops", async () => {
  const { client, peer, log } = await session({ switchTimeoutMs: 150 });
  const failed = record(client, "switchFailed");
  await client.startVoice();
  assert.deepEqual(await peer.next(), { type: "voice.start" });
  peer.send({ type: "error", code: "upstream_unavailable", message: "the voice model cannot be reached", retryable: true });
  await until("switch failed", () => failed.length === 1);
  assert.deepEqual(failed[0][1], { to: "voice", code: "upstream_unavailable", message: "the voice model cannot be reached" });
  await until("mic released", () => client.voice.mic === "off" && log.micStops === 1);

  assert.equal(await client.voice.start({ mic: false }), true);
  assert.deepEqual(await peer.next(), { type: "voice.start" });
  await until("timeout", () => failed.length === 2);
  assert.equal(failed[1][1].code, "timeout");
  assert.equal(client.voice.switching, null);
});

test("stopVoice stops the microphone and asks for text", async () => {
  const { client, peer } = await session();
  peer.send({ type: "mode", mode: "voice", reason: "client" });
  await until("voice", () => client.voice.mode === "voice");
  await client.startVoice();
  assert.ok("binary" in (await peer.next()));
  assert.equal(await client.stopVoice(), true);
  let f;
  do f = await peer.next(); while ("binary" in f);
  assert.deepEqual(f, { type: "audio.end" });
  assert.deepEqual(await peer.next(), { type: "voice.stop" });
  assert.equal(client.voice.switching, "text");
});

test("while the user is blocked the microphone is off and cannot start", async () => {
  const { client, peer } = await session();
  peer.send({ type: "mode", mode: "voice", reason: "client" });
  await until("voice", () => client.voice.mode === "voice");
  await client.startVoice();
  peer.send({ type: "blocked", until: new Date(Date.now() + 400).toISOString(), reason: "abuse" });
  await until("blocked", () => client.voice.blocked && client.voice.mic === "off");
  assert.equal(await client.voice.startMic(), false);
  await until("unblocked", () => !client.voice.blocked, 2000);
  assert.equal(await client.voice.startMic(), true);
});

test("a dropped connection silences queued speech", async () => {
  const { client, peer, log } = await session();
  peer.sendBinary(Buffer.alloc(960));
  await until("speech", () => log.pushed.length === 1);
  const flushes = log.flushes;
  peer.close(4100, "draining");
  await until("flushed", () => log.flushes > flushes);
  const again = await gw.peer();
  assert.equal((await again.next()).resume.sessionId, "s1");
  assert.equal(client.voice.audioFramesReceived, 1);
});
