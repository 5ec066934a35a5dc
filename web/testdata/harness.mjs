// Runs the page's DOM-free modules under Node for the *_node_test.go
// tests. Prints JSON lines.
import { Downsampler, FRAME_BYTES, FRAME_SAMPLES, FrameAssembler, MIC_RATE, PLAYBACK_RATE, downmix, pcm16ToFloat } from "./audio.js";
import { ConfirmQueue } from "./confirm.js";
import { compactArgs, formatDuration, formatRemaining } from "./format.js";
import { PlaybackQueue } from "./playback.js";
import { Connection, backoffDelay, closeAction, gatewayURL } from "./protocol.js";
import { TurnTexts } from "./transcripts.js";
import { MIC_ON, VoiceLink } from "./voicelink.js";

const [mode, arg] = process.argv.slice(2);
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");

function memoryStorage() {
  const items = new Map();
  return {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => items.set(k, String(v)),
    removeItem: (k) => items.delete(k),
  };
}

const snapshot = (queue) => queue.items.map(({ token, tool, sent }) => ({ token, tool, sent }));

switch (mode) {
  case "classify":
    out(Object.fromEntries(JSON.parse(arg).map((code) => [code, closeAction(code)])));
    break;
  case "url":
    out(JSON.parse(arg).map((loc) => gatewayURL(loc)));
    break;
  case "backoff":
    out([...Array(8).keys()].map((a) => [backoffDelay(a, () => 0), backoffDelay(a, () => 0.999999)]));
    break;
  case "format": {
    const { args, durations, remaining } = JSON.parse(arg);
    out({
      args: args.map((a) => compactArgs(a)),
      durations: durations.map((ms) => formatDuration(ms)),
      remaining: remaining.map((ms) => formatRemaining(ms)),
    });
    break;
  }
  case "queue": {
    // Plays a script of operations on a ConfirmQueue with a fake clock;
    // prints, per step, what the operation returned and the queue after it.
    let now = Date.parse("2030-01-01T00:00:00Z");
    let changes = 0;
    const queue = new ConfirmQueue({ now: () => now, onChange: () => changes++ });
    for (const step of JSON.parse(arg)) {
      let result = null;
      switch (step.op) {
        case "add": result = queue.add(step.msg); break;
        case "replace": result = queue.replace(step.list).map((i) => i.token); break;
        case "answer": result = queue.answer(step.token, step.approve); break;
        case "unsend": queue.unsend(step.token); break;
        case "settle": result = queue.settle(step.token)?.token ?? null; break;
        case "dropSent": result = queue.dropSent().map((i) => i.token); break;
        case "advance": now += step.ms; result = queue.nextExpiryIn(); break;
        case "expire": result = queue.expire().map((i) => i.token); break;
        default: process.exit(4);
      }
      out({ op: step.op, result, queue: snapshot(queue), changed: changes > 0 });
      changes = 0;
    }
    break;
  }
  case "confirm": {
    // Connects like the page and answers each confirmation request as it
    // reaches the head of the queue, the way app.js does: tokens ending in
    // "-yes" are approved, "-no" denied, others left for "another tab".
    // Each answer is attempted twice, as a double click would.
    if (typeof WebSocket === "undefined") process.exit(3);
    let conn;
    const queue = new ConfirmQueue({
      onChange: () => {
        out({ event: "queue", items: snapshot(queue) });
        const head = queue.current;
        if (head === null || head.sent || !conn.ready) return;
        const approve = head.token.endsWith("-yes") ? true : head.token.endsWith("-no") ? false : null;
        if (approve === null) return;
        for (let i = 0; i < 2; i++) {
          const fields = queue.answer(head.token, approve);
          if (fields !== null && !conn.send("confirm", fields)) queue.unsend(head.token);
        }
      },
    });
    conn = new Connection({
      url: arg,
      storage: memoryStorage(),
      onMessage: (msg) => {
        out({ event: "message", type: msg.type });
        if (msg.type === "session.ready") queue.replace(msg.resumed === true ? msg.pendingConfirmations : []);
        else if (msg.type === "confirm.request") queue.add(msg);
        else if (msg.type === "confirm.done") queue.settle(msg.token);
      },
      onStatus: (status) => {
        out({ event: "status", ...status });
        if (status.state === "stopped") process.exit(0);
      },
    });
    conn.connect();
    setTimeout(() => {
      out({ event: "timeout" });
      process.exit(2);
    }, 15_000);
    break;
  }
  case "connect": {
    if (typeof WebSocket === "undefined") process.exit(3);
    const storage = memoryStorage();
    const conn = new Connection({
      url: arg,
      storage,
      onMessage: (msg) => out({ event: "message", type: msg.type }),
      onStatus: (status) => {
        out({ event: "status", ...status });
        if (status.state === "stopped") {
          out({ event: "stored", value: storage.getItem("turnstile.session") });
          process.exit(0);
        }
      },
    });
    conn.connect();
    setTimeout(() => {
      out({ event: "timeout" });
      process.exit(2);
    }, 15_000);
    break;
  }
  case "constants":
    out({ MIC_RATE, PLAYBACK_RATE, FRAME_SAMPLES, FRAME_BYTES });
    break;
  case "resample": {
    // A sine (optionally two, as stereo channels to downmix) through the
    // microphone's converter in render quanta of `chunk` samples; prints
    // the 16 kHz output.
    const { inRate, tones, seconds, chunk } = JSON.parse(arg);
    const down = new Downsampler(inRate);
    const total = Math.round(inRate * seconds);
    const result = [];
    for (let start = 0; start < total; start += chunk) {
      const n = Math.min(chunk, total - start);
      const channels = tones.map(({ freq, amp }) => {
        const ch = new Float32Array(n);
        for (let i = 0; i < n; i++) ch[i] = amp * Math.sin((2 * Math.PI * freq * (start + i)) / inRate);
        return ch;
      });
      for (const v of down.process(downmix(channels))) result.push(Math.round(v * 1e6) / 1e6);
    }
    out(result);
    break;
  }
  case "frames": {
    // Samples in chunks of the given sizes through a FrameAssembler; prints
    // the frame sizes, the flushed tail's size, and the PCM16 values of
    // `values` (read back from the bytes, little-endian).
    const { chunks, values } = JSON.parse(arg);
    const frames = new FrameAssembler();
    const sizes = [];
    for (const n of chunks) for (const f of frames.push(new Float32Array(n).fill(0.25))) sizes.push(f.byteLength);
    const tail = frames.flush();
    const coded = new FrameAssembler(values.length).push(Float32Array.from(values.map((v) => (v === "NaN" ? NaN : v))))[0];
    const view = new DataView(coded);
    const pcm = [...Array(values.length).keys()].map((i) => view.getInt16(i * 2, true));
    const back = [...pcm16ToFloat(new Uint8Array(coded))].map((v) => Math.round(v * 1e5) / 1e5);
    out({ sizes, tail: tail === null ? 0 : tail.byteLength, again: frames.flush(), pcm, back });
    break;
  }
  case "playback": {
    // A script on a PlaybackQueue at 24 → outRate kHz: push n samples of a
    // value, render n output samples (summarized), flush.
    const { outRate, startMs, maxSeconds, steps } = JSON.parse(arg);
    const q = new PlaybackQueue({ inRate: 24_000, outRate, startMs, maxSeconds });
    for (const step of steps) {
      let result = null;
      if (step.op === "push") {
        result = q.push(new Float32Array(step.n).fill(step.value ?? 0.5));
      } else if (step.op === "render") {
        const buf = new Float32Array(step.n);
        q.render(buf);
        const nonzero = buf.reduce((c, v) => c + (v !== 0 ? 1 : 0), 0);
        result = { nonzero, first: buf[0], last: buf[buf.length - 1], max: Math.max(...buf) };
      } else if (step.op === "flush") {
        result = q.flush();
      } else {
        process.exit(4);
      }
      const { state, buffered, played, dropped, flushed, underruns } = q;
      out({ op: step.op, result, state, buffered, played, dropped, flushed, underruns });
    }
    break;
  }
  case "texts": {
    // Events on a TurnTexts; prints each turn's assembled texts at the end.
    const texts = new TurnTexts();
    const turns = new Set();
    for (const [kind, turn, text] of JSON.parse(arg)) {
      turns.add(turn);
      texts[kind](turn, text);
    }
    out(Object.fromEntries([...turns].map((n) => [n, { user: texts.user(n), ...texts.model(n), spoken: texts.spoken(n) }])));
    break;
  }
  case "voice": {
    // A voice session like the page's, with a fake microphone: a 1 kHz
    // sine at 48 kHz through the worklet's conversion in 128-sample
    // quanta, one 40 ms burst every 40 ms. The mic starts in a text
    // session (voice.start goes out first), stops on the first
    // audio.interrupted (tail and audio.end), and a frame captured after
    // the gateway's `mode text` must not be sent. Prints events.
    if (typeof WebSocket === "undefined") process.exit(3);
    const down = new Downsampler(48_000);
    const frames = new FrameAssembler();
    let t = 0;
    let audioBytes = 0;
    let timer = null;
    const capture = () => {
      for (let q = 0; q < 15; q++) {
        const chunk = new Float32Array(128);
        for (let i = 0; i < 128; i++, t++) chunk[i] = 0.5 * Math.sin((2 * Math.PI * 1000 * t) / 48_000);
        for (const f of frames.push(down.process(chunk))) link.frame(f);
      }
    };
    const conn = new Connection({
      url: arg,
      storage: memoryStorage(),
      onAudio: (buf) => {
        audioBytes += buf.byteLength;
      },
      onMessage: (msg) => {
        out({ event: "message", type: msg.type, mode: msg.mode ?? null, audioBytes });
        if (msg.type === "session.ready") {
          link.sessionReady(msg.mode);
          if (timer === null) {
            link.micStarting();
            out({ event: "micStarted", ok: link.micStarted(), mic: link.mic, switching: link.switching });
            timer = setInterval(capture, 40);
          }
        } else if (msg.type === "mode") {
          link.modeChanged(msg.mode);
          out({ event: "mode", mic: link.mic, framesSent: link.framesSent });
          if (msg.mode === "text") {
            link.frame(new ArrayBuffer(FRAME_BYTES));
            out({ event: "afterText", framesSent: link.framesSent, framesDropped: link.framesDropped });
          }
        } else if (msg.type === "audio.interrupted") {
          clearInterval(timer);
          link.micStopped(frames.flush());
          out({ event: "micStopped", mic: link.mic, framesSent: link.framesSent, bytesSent: link.bytesSent, audioEnds: link.audioEnds });
        }
      },
      onStatus: (status) => {
        if (status.state !== "connected") link.disconnected();
        if (status.state === "stopped") {
          out({ event: "stopped", code: status.code, micOn: link.mic === MIC_ON });
          process.exit(0);
        }
      },
    });
    const link = new VoiceLink({ conn });
    conn.connect();
    setTimeout(() => {
      out({ event: "timeout" });
      process.exit(2);
    }, 15_000);
    break;
  }
  default:
    process.exit(4);
}
