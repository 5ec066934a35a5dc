// @turnstile-gw/client: the browser client of the Turnstile gateway
// (browser protocol v1). Plain ES modules, no build step, no dependencies;
// types in index.d.ts. See README.md.

export {
  AUTH_SUBPROTOCOL_PREFIX, Client, HISTORY_LIMIT_MAX, MAX_FAILED_ATTEMPTS, PING_INTERVAL_MS, PONG_TIMEOUT_MS, SUBPROTOCOL,
  UNREACHABLE_OR_REFUSED, connect, gatewayURL,
} from "./client.js";
export { BACKOFF_MAX_MS, BACKOFF_MIN_MS, backoffDelay, closeAction, describeClose, retryAfterMs } from "./close.js";
export { refreshDelay, tokenExpiry } from "./token.js";
export { SWITCH_TIMEOUT_MS, Voice } from "./voice.js";
export { MIC_OFF, MIC_ON, MIC_STARTING, MIC_WAITING } from "./voicelink.js";
export { AudioEngine, Microphone, Speaker, browserAudio } from "./devices.js";
export { Downsampler, FRAME_BYTES, FRAME_SAMPLES, FrameAssembler, MIC_RATE, PLAYBACK_RATE, downmix, lowPass, pcm16ToFloat, toPCM16 } from "./audio.js";
export { BUFFERING, IDLE, PLAYING, PlaybackQueue } from "./playback.js";
export { TurnTexts } from "./transcripts.js";
export { ConfirmQueue, parseRequest } from "./confirm.js";
