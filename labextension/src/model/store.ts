/**
 * The panel's copy of the document and of the GPU samples, kept from the websocket's messages
 * or from polls (pure: no DOM, no timers; the connection in live/connection.ts feeds it).
 */
import type { IClusterDoc } from './documents';
import { GpuHistory } from './gpuhistory';
import type { LiveMessage, PatchOp } from './messages';
import { applyOps, PatchError, shareUnchanged } from './ops';

/**
 * What a message did: "doc" (the document changed), "gpus" (samples or history came),
 * "gap" (a message is missing or does not fit: reconnect for a new snapshot), "ignored".
 */
export type Receipt = 'doc' | 'gpus' | 'gap' | 'ignored';

export class LiveStore {
  constructor(readonly history = new GpuHistory()) {}

  /** The document (null before the first snapshot or poll). */
  doc: IClusterDoc | null = null;
  /** Bumped whenever `doc` changes; `gpuVersion` whenever samples or history come. */
  docVersion = 0;
  gpuVersion = 0;
  /** The server's clock minus this browser's, in ms. */
  offsetMs = 0;

  /** The server's time now, estimated from the last message's server_time. */
  serverNow(localNowMs: number): number {
    return localNowMs + this.offsetMs;
  }

  /** A new connection: its first message must be a snapshot (or GPU samples), not a patch. */
  newConnection(): void {
    this._seq = null;
    this._hasSnapshot = false;
  }

  /** The seq of the last message in sequence (null: none yet on this connection). */
  get seq(): number | null {
    return this._seq;
  }

  /**
   * One message. Sequencing: every numbered message must follow the last one (seq + 1), or it
   * is a gap; a patch must also come after a snapshot. gpu_history, sent to one subscriber on
   * connect, may be numbered in the sequence or outside it: it is taken either way.
   */
  receive(message: LiveMessage, localNowMs: number): Receipt {
    if (!message || typeof message !== 'object') {
      return 'ignored';
    }
    const seq = typeof message.seq === 'number' ? message.seq : null;
    const next = seq !== null && (this._seq === null || seq === this._seq + 1);
    switch (message.type) {
      case 'snapshot':
        this._seq = seq ?? 0;
        this._hasSnapshot = true;
        this.clockFrom(message.server_time, localNowMs);
        this.setDoc(message.doc);
        return 'doc';
      case 'patch':
        if (!next || !this._hasSnapshot || this.doc === null || !this.patched(message.ops || [])) {
          return 'gap';
        }
        break;
      case 'gpus':
        if (seq !== null && !next) {
          return 'gap';
        }
        this.history.addSamples(message);
        this.gpuVersion++;
        break;
      case 'gpu_history':
        this.history.seed(message);
        this.gpuVersion++;
        if (!next) {
          this.clockFrom(message.server_time, localNowMs);
          return 'gpus';
        }
        break;
      default:
        return 'ignored';
    }
    if (seq !== null) {
      this._seq = seq;
    }
    this.clockFrom(message.server_time, localNowMs);
    return message.type === 'patch' ? 'doc' : 'gpus';
  }

  /** Applies `ops` to the document; false, the document left as it was, when they do not fit. */
  private patched(ops: PatchOp[]): boolean {
    try {
      this.doc = applyOps(this.doc, ops);
    } catch (error) {
      if (error instanceof PatchError) {
        return false;
      }
      throw error;
    }
    this.docVersion++;
    return true;
  }

  /** A document from a poll (or a refresh), at the server's time when known. */
  setPolled(doc: IClusterDoc, serverTimeMs: number | null, localNowMs: number): void {
    if (serverTimeMs !== null) {
      this.offsetMs = serverTimeMs - localNowMs;
    }
    this.setDoc(doc);
  }

  private setDoc(doc: IClusterDoc): void {
    this.doc = shareUnchanged(this.doc, doc);
    this.docVersion++;
    const hosts = new Set((this.doc?.hosts || []).map(h => h.name));
    if (hosts.size > 0) {
      this.history.keepOnly(hosts);
    }
  }

  private clockFrom(serverTime: string | undefined, localNowMs: number): void {
    const ms = serverTime ? Date.parse(serverTime) : NaN;
    if (!isNaN(ms)) {
      this.offsetMs = ms - localNowMs;
    }
  }

  private _seq: number | null = null;
  private _hasSnapshot = false;
}
