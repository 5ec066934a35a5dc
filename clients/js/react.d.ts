// Types of @turnstile-gw/client/react.

import type { Client, ClientOptions, ClosedStatus, Mode, StatusState, VoiceState } from "./index.js";

export interface TurnstileOptions extends ClientOptions {
  /** false: stay disconnected (default true). */
  enabled?: boolean;
}

export interface TurnstileState {
  /** The connected client; null before the first effect and while disabled. */
  client: Client | null;
  status: StatusState;
  ready: boolean;
  sessionId: string | null;
  mode: Mode | null;
  /** The highest turn number seen. */
  turn: number;
  /** A turn is running (between turn.start and turn.done). */
  busy: boolean;
  /** Why the client stopped, while it is stopped. */
  closed: ClosedStatus | null;
  voice: VoiceState;
}

/** Connects while mounted; reconnects when url or mode change. */
export declare function useTurnstile(options: TurnstileOptions): TurnstileState;
