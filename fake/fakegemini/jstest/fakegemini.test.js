// Drives cmd/fakegemini with the official JS SDK, unmodified, the way a
// Node developer points it at Google: `new GoogleGenAI({apiKey,
// httpOptions: {baseUrl}})` with the fake's http:// base URL (the SDK turns
// it into ws:// for Live and asks for "//ws/...", key in the query).
//
// Both SDK lines run: 3.x (API version v1 by default) and 2.x (v1beta).
// FAKEGEMINI_BIN names the fake's binary (scripts/test-js-sdk builds it);
// it runs in strict mode, and a protocol violation fails the test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as genai3 from '@google/genai';
import * as genai2 from 'genai-v2';

const sdks = [
  { name: '@google/genai 3.x (v1)', lib: genai3, apiVersion: 'v1' },
  { name: '@google/genai 2.x (v1beta)', lib: genai2, apiVersion: 'v1beta' },
];

const tools = [{
  functionDeclarations: [
    { name: 'kb_search', description: 'Search the knowledge base.', parametersJsonSchema: { type: 'object', properties: { query: { type: 'string' } } } },
    { name: 'create_ticket', description: 'Open a support ticket.', parametersJsonSchema: { type: 'object', properties: { title: { type: 'string' } } } },
  ],
}];

let fake;
let baseUrl;
let logs = '';

before(async () => {
  const bin = process.env.FAKEGEMINI_BIN;
  assert.ok(bin, 'FAKEGEMINI_BIN must name the cmd/fakegemini binary (see scripts/test-js-sdk)');
  fake = spawn(bin, ['-addr', '127.0.0.1:0', '-strict', '-pace', '20ms', '-log-level', 'debug'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  baseUrl = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fakegemini did not start:\n${logs}`)), 20000);
    fake.on('exit', (code) => reject(new Error(`fakegemini exited with ${code}:\n${logs}`)));
    fake.stderr.setEncoding('utf8');
    fake.stderr.on('data', (chunk) => {
      logs += chunk;
      const m = logs.match(/"base_url":"([^"]+)"/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
});

// logLines waits until the fake has logged n JSON lines whose msg is msg
// since mark (an offset into logs), and returns them; the fake logs a
// request after answering it, so the line may trail the answer.
async function logLines(mark, msg, n) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const complete = logs.slice(mark, logs.lastIndexOf('\n') + 1);
    const lines = complete.split('\n').filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
    if (lines.length >= n || Date.now() > deadline) return lines;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

after(async () => {
  if (!fake) return;
  const exited = new Promise((resolve) => fake.on('exit', resolve));
  fake.kill('SIGTERM');
  await exited;
  const violations = logs.split('\n').filter((l) => l.includes('protocol violation'));
  assert.deepEqual(violations, [], 'the fake saw malformed requests');
});

for (const { name, lib, apiVersion } of sdks) {
  test(`${name}: a streamed answer with a function call, then its summary`, { timeout: 20000 }, async () => {
    const mark = logs.length;
    const ai = new lib.GoogleGenAI({ apiKey: 'test-key', httpOptions: { baseUrl } });
    const user = { role: 'user', parts: [{ text: '/call create_ticket {"title":"printer on fire"}' }] };

    let calls = [];
    let modelContent;
    for await (const chunk of await ai.models.generateContentStream({ model: 'demo', contents: [user], config: { tools } })) {
      calls = calls.concat(chunk.functionCalls ?? []);
      modelContent = chunk.candidates?.[0]?.content ?? modelContent;
    }
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'create_ticket');
    assert.deepEqual(calls[0].args, { title: 'printer on fire' });

    const answer = { role: 'user', parts: [{ functionResponse: { name: 'create_ticket', response: { output: { id: 'T-1' } } } }] };
    const texts = [];
    let finish;
    for await (const chunk of await ai.models.generateContentStream({ model: 'demo', contents: [user, modelContent, answer], config: { tools } })) {
      texts.push(chunk.text ?? '');
      finish = chunk.candidates?.[0]?.finishReason ?? finish;
    }
    assert.ok(texts.length > 1, `the answer came in ${texts.length} chunk(s), want it streamed`);
    assert.equal(texts.join(''), 'The create_ticket tool succeeded: {"id":"T-1"}');
    assert.equal(finish, 'STOP');
    const served = await logLines(mark, 'fake gemini: reply sent', 2);
    assert.deepEqual(served.map((l) => [l.api, l.version, l.method]),
      [['gemini', apiVersion, 'streamGenerateContent'], ['gemini', apiVersion, 'streamGenerateContent']]);
  });

  test(`${name}: a Live session hears audio and answers with audio, transcripts and turnComplete`, { timeout: 20000 }, async () => {
    const mark = logs.length;
    const ai = new lib.GoogleGenAI({ apiKey: 'test-key', httpOptions: { baseUrl } });
    const got = { audioBytes: 0, audioMime: new Set(), input: '', output: '', generationComplete: false, order: [] };
    let closed;
    const turnDone = new Promise((resolve, reject) => {
      closed = reject;
      globalThis.setTimeout(() => reject(new Error(`no turnComplete; got ${JSON.stringify(got)}`)), 15000).unref();
      got.resolve = resolve;
    });
    const session = await ai.live.connect({
      model: 'gemini-live-demo',
      config: {
        responseModalities: [lib.Modality.AUDIO],
        inputAudioTranscription: {},
        outputAudioTranscription: {},
      },
      callbacks: {
        onmessage: (m) => {
          const sc = m.serverContent;
          if (!sc) return;
          for (const p of sc.modelTurn?.parts ?? []) {
            if (p.inlineData?.data) {
              got.audioBytes += Buffer.from(p.inlineData.data, 'base64').length;
              got.audioMime.add(p.inlineData.mimeType);
              got.order.push('audio');
            }
          }
          if (sc.inputTranscription?.text) got.input += sc.inputTranscription.text;
          if (sc.outputTranscription?.text) got.output += sc.outputTranscription.text;
          if (sc.generationComplete) got.generationComplete = true;
          if (sc.turnComplete) {
            got.order.push('turnComplete');
            got.resolve();
          }
        },
        onerror: (e) => closed(new Error(`live error: ${e.message ?? e}`)),
        onclose: (e) => closed(new Error(`live closed: ${e.code} ${e.reason}`)),
      },
    });
    try {
      // Half a second of a loud 220 Hz tone as 16 kHz PCM16, in 100 ms
      // chunks, then the end of the microphone stream.
      const pcm = Buffer.alloc(16000 * 2 / 2);
      for (let i = 0; i < pcm.length / 2; i++) {
        pcm.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / 16000)), 2 * i);
      }
      for (let off = 0; off < pcm.length; off += 3200) {
        session.sendRealtimeInput({ audio: { data: pcm.subarray(off, off + 3200).toString('base64'), mimeType: 'audio/pcm;rate=16000' } });
      }
      session.sendRealtimeInput({ audioStreamEnd: true });
      await turnDone;
    } finally {
      closed = () => {};
      session.close();
    }
    assert.ok(got.audioBytes > 0 && got.audioBytes % 2 === 0, `got ${got.audioBytes} bytes of audio`);
    assert.deepEqual([...got.audioMime], ['audio/pcm;rate=24000']);
    assert.match(got.input, /\(speech\)/);
    assert.match(got.output, /I heard 0\.5 seconds of speech/);
    assert.ok(got.generationComplete, 'no generationComplete');
    assert.equal(got.order.at(-1), 'turnComplete');
    const started = await logLines(mark, 'fake gemini live: session started', 1);
    assert.deepEqual(started.map((l) => [l.api, l.version, l.model]), [['gemini', apiVersion, 'gemini-live-demo']]);
  });
}
