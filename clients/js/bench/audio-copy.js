// What the `audio` event's copy costs: the client copies each binary frame
// of model speech (ArrayBuffer.slice) only when an `audio` listener exists,
// because the speaker transfers the original to its worklet. Run:
//   node clients/js/bench/audio-copy.js
// Prints the median ns per frame for typical frame sizes, and what one
// second of speech (24 kHz PCM16 = 48000 bytes) costs in copies.

const SIZES = [960, 3840, 11520]; // 20 ms, 80 ms, 240 ms of 24 kHz PCM16
const ROUNDS = 15;
const PER_ROUND = 20000;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

let sink = 0;
for (const size of SIZES) {
  const frame = new ArrayBuffer(size);
  new Uint8Array(frame).fill(7);
  const copy = [];
  const none = [];
  for (let r = 0; r < ROUNDS; r++) {
    let t = process.hrtime.bigint();
    for (let i = 0; i < PER_ROUND; i++) sink += frame.slice(0).byteLength;
    copy.push(Number(process.hrtime.bigint() - t) / PER_ROUND);
    t = process.hrtime.bigint();
    for (let i = 0; i < PER_ROUND; i++) sink += frame.byteLength;
    none.push(Number(process.hrtime.bigint() - t) / PER_ROUND);
  }
  const perFrame = median(copy) - median(none);
  const perSecond = (perFrame * 48000) / size / 1000;
  console.log(`${size} B frame: copy ${perFrame.toFixed(0)} ns/frame; ${perSecond.toFixed(1)} µs per second of speech`);
}
if (sink === 0) console.log("");
