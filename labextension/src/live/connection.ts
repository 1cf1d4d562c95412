/**
 * The panel's connection: a websocket to {base_url}mlp-magic/live feeding a LiveStore, which
 * reconnects after a break (0.5 s doubling to 10 s) and polls GET mlp-magic/cluster every 5 s
 * while the websocket cannot connect.
 *
 * Everything outside (the socket, the request, the timers, the clock) comes through ILiveEnv,
 * so that the tests drive it with fakes; the panel gives it the browser's (browser.ts).
 */
import type { LiveMessage } from '../model/messages';
import { LiveStore, Receipt } from '../model/store';
import type { IFetchedDoc } from './routes';

export const BACKOFF_FIRST_MS = 500;
export const BACKOFF_MAX_MS = 10000;
export const POLL_INTERVAL_MS = 5000;
export const POLL_MAX_MS = 60000;
/** A socket that opened but sent no snapshot within this long is given up. */
export const SNAPSHOT_TIMEOUT_MS = 15000;
/** A connection live this long was healthy: the next break starts the backoff over. */
export const HEALTHY_MS = 30000;

/** The wait before reconnect attempt `attempt` (0: the first): 0.5 s, 1, 2, 4, 8, 10, 10 s... */
export function backoffDelay(attempt: number): number {
  const n = Math.max(0, Math.floor(attempt));
  return n >= 5 ? BACKOFF_MAX_MS : Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** n);
}

/** The wait before the next poll after `failures` failed polls in a row: 5 s, then doubling to 60 s. */
export function pollDelay(failures: number): number {
  const n = Math.max(0, Math.floor(failures));
  return n >= 4 ? POLL_MAX_MS : Math.min(POLL_MAX_MS, POLL_INTERVAL_MS * 2 ** n);
}

/** "live": the websocket delivers; "polling": it cannot, polls do; "reconnecting": neither yet. */
export type ConnectionState = 'live' | 'reconnecting' | 'polling';

/** What a WebSocket offers that the connection uses. */
export interface ISocketLike {
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
  close(code?: number, reason?: string): void;
}

export type TimerHandle = unknown;

export interface ILiveEnv {
  openSocket(): ISocketLike;
  fetchDoc(): Promise<IFetchedDoc>;
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
  /** Local clock, epoch ms. */
  now(): number;
  /** The browser tab is in the background: polls wait. */
  isHidden?(): boolean;
}

export interface ILiveListener {
  /** The document changed (or the first one came). */
  onDoc?(): void;
  /** GPU samples or history came. */
  onGpus?(): void;
  /** The connection state or its error changed. */
  onState?(state: ConnectionState, error: unknown): void;
}

export class LiveConnection {
  constructor(
    readonly store: LiveStore,
    private _env: ILiveEnv,
    private _listener: ILiveListener = {}
  ) {}

  get state(): ConnectionState {
    return this._state;
  }

  /** The last poll's error (null when the last poll, or the websocket, worked). */
  get error(): unknown {
    return this._error;
  }

  /** Has the websocket ever delivered a snapshot? */
  get everLive(): boolean {
    return this._everLive;
  }

  get running(): boolean {
    return this._running;
  }

  /** Connect (the panel is shown). */
  start(): void {
    if (this._running) {
      return;
    }
    this._running = true;
    this._attempt = 0;
    this.setState('reconnecting');
    this.connect();
  }

  /** Close everything and wait (the panel is hidden); start() catches up with a snapshot. */
  stop(): void {
    this._running = false;
    this.dropSocket();
    this.clear('_reconnectTimer');
    this.clear('_pollTimer');
    this.clear('_snapshotTimer');
  }

  /** Give up the socket and connect again at once (a seq gap, or asked). */
  reconnectNow(): void {
    if (!this._running) {
      return;
    }
    this.dropSocket();
    this.clear('_reconnectTimer');
    this.connect();
  }

  /**
   * A document from outside (the Refresh button's answer): shown unless the websocket is live,
   * whose patches apply to the server's own sequence of documents.
   */
  acceptDoc(fetched: IFetchedDoc): void {
    if (this._state === 'live') {
      return;
    }
    this.store.setPolled(fetched.doc, fetched.serverTimeMs, this._env.now());
    this._listener.onDoc?.();
  }

  private connect(): void {
    this.store.newConnection();
    let socket: ISocketLike;
    try {
      socket = this._env.openSocket();
    } catch {
      this.socketLost();
      return;
    }
    this._socket = socket;
    socket.onopen = () => {
      this.clear('_snapshotTimer');
      this._snapshotTimer = this._env.setTimeout(() => {
        this._snapshotTimer = null;
        if (socket === this._socket) {
          this.dropSocket();
          this.socketLost();
        }
      }, SNAPSHOT_TIMEOUT_MS);
    };
    socket.onmessage = event => {
      if (socket === this._socket) {
        this.handle(event.data);
      }
    };
    socket.onclose = () => {
      if (socket === this._socket) {
        this._socket = null;
        this.socketLost();
      }
    };
    socket.onerror = () => {
      // A close follows.
    };
  }

  private handle(data: unknown): void {
    let message: LiveMessage;
    let receipt: Receipt;
    try {
      message = JSON.parse(String(data)) as LiveMessage;
      receipt = this.store.receive(message, this._env.now());
    } catch {
      receipt = 'gap';
      message = null as unknown as LiveMessage;
    }
    if (receipt === 'gap') {
      this.dropSocket();
      this.socketLost();
      return;
    }
    if (message.type === 'snapshot') {
      this.clear('_snapshotTimer');
      this.clear('_pollTimer');
      this._liveSince = this._env.now();
      this._pollFailures = 0;
      this._everLive = true;
      this._error = null;
      this.setState('live');
    }
    if (receipt === 'doc') {
      this._listener.onDoc?.();
    } else if (receipt === 'gpus') {
      this._listener.onGpus?.();
    }
  }

  /** The socket closed, failed, or lost track: try again later, and poll meanwhile. */
  private socketLost(): void {
    this.clear('_snapshotTimer');
    if (!this._running) {
      return;
    }
    if (this._state === 'live') {
      // A server that sends a snapshot and then breaks at once is not retried at 2 Hz forever.
      if (this._env.now() - this._liveSince >= HEALTHY_MS) {
        this._attempt = 0;
      }
      this.setState('reconnecting');
    }
    const delay = backoffDelay(this._attempt++);
    this.clear('_reconnectTimer');
    this._reconnectTimer = this._env.setTimeout(() => {
      this._reconnectTimer = null;
      if (this._running) {
        this.connect();
      }
    }, delay);
    if (this._pollTimer === null && !this._polling) {
      void this.poll();
    }
  }

  /** Polls are for while the websocket is not live (a method: the state changes across awaits). */
  private pollWanted(): boolean {
    return this._running && this._state !== 'live';
  }

  private async poll(): Promise<void> {
    if (!this.pollWanted()) {
      return;
    }
    if (this._env.isHidden?.()) {
      this.schedulePoll();
      return;
    }
    this._polling = true;
    try {
      const fetched = await this._env.fetchDoc();
      if (!this.pollWanted()) {
        return;
      }
      this._pollFailures = 0;
      this._error = null;
      this.store.setPolled(fetched.doc, fetched.serverTimeMs, this._env.now());
      this.setState('polling', true);
      this._listener.onDoc?.();
    } catch (error) {
      if (!this.pollWanted()) {
        return;
      }
      this._pollFailures++;
      this._error = error;
      this.setState('reconnecting', true);
    } finally {
      this._polling = false;
      this.schedulePoll();
    }
  }

  private schedulePoll(): void {
    if (!this.pollWanted() || this._pollTimer !== null) {
      return;
    }
    this._pollTimer = this._env.setTimeout(() => {
      this._pollTimer = null;
      void this.poll();
    }, pollDelay(this._pollFailures));
  }

  private dropSocket(): void {
    const socket = this._socket;
    this._socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      try {
        socket.close();
      } catch {
        // already closed
      }
    }
  }

  private setState(state: ConnectionState, always = false): void {
    if (state !== this._state || always) {
      this._state = state;
      this._listener.onState?.(state, this._error);
    }
  }

  private clear(name: '_reconnectTimer' | '_pollTimer' | '_snapshotTimer'): void {
    if (this[name] !== null) {
      this._env.clearTimeout(this[name]);
      this[name] = null;
    }
  }

  private _state: ConnectionState = 'reconnecting';
  private _error: unknown = null;
  private _everLive = false;
  private _running = false;
  private _attempt = 0;
  private _liveSince = 0;
  private _pollFailures = 0;
  private _polling = false;
  private _socket: ISocketLike | null = null;
  private _reconnectTimer: TimerHandle | null = null;
  private _pollTimer: TimerHandle | null = null;
  private _snapshotTimer: TimerHandle | null = null;
}
