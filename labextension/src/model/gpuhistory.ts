/**
 * GPU history for the sparklines (pure): per GPU, a ring buffer of (time, utilisation, memory)
 * fed by the websocket's "gpus" messages and seeded by its "gpu_history".
 */
import type { GpuSample } from './documents';
import type { IGpuHistoryMessage, IGpusMessage } from './messages';
import { MEM, UTIL } from './gpus';

/** At least 10 minutes at 1 Hz. */
export const HISTORY_SAMPLES = 600;

/** A fixed-size ring of numbers (NaN for unknown); the oldest value is dropped when full. */
export class RingBuffer {
  constructor(readonly capacity: number) {
    if (!(capacity > 0)) {
      throw new Error('a ring buffer holds at least one value');
    }
    this._data = new Float64Array(capacity);
  }

  get length(): number {
    return this._length;
  }

  push(value: number | null | undefined): void {
    this._data[(this._start + this._length) % this.capacity] =
      value === null || value === undefined ? NaN : value;
    if (this._length < this.capacity) {
      this._length++;
    } else {
      this._start = (this._start + 1) % this.capacity;
    }
  }

  /** The i-th value from the oldest (0) to the newest (length - 1). */
  get(i: number): number {
    if (i < 0 || i >= this._length) {
      return NaN;
    }
    return this._data[(this._start + i) % this.capacity];
  }

  /** The newest value (NaN when empty). */
  last(): number {
    return this.get(this._length - 1);
  }

  toArray(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this._length; i++) {
      out.push(this.get(i));
    }
    return out;
  }

  private _data: Float64Array;
  private _start = 0;
  private _length = 0;
}

/** One GPU's series: times (epoch s), utilisation (%), memory used (MiB). */
export class GpuSeries {
  constructor(capacity = HISTORY_SAMPLES) {
    this.t = new RingBuffer(capacity);
    this.util = new RingBuffer(capacity);
    this.mem = new RingBuffer(capacity);
  }

  /** Adds a point; one not newer than the last is ignored (a re-sent history). */
  push(t: number, util: number | null | undefined, mem: number | null | undefined): boolean {
    if (this.t.length > 0 && !(t > this.t.last())) {
      return false;
    }
    this.t.push(t);
    this.util.push(util);
    this.mem.push(mem);
    return true;
  }

  readonly t: RingBuffer;
  readonly util: RingBuffer;
  readonly mem: RingBuffer;
}

/** Every host's GPUs' series, and each host's latest samples (for the rows and the heatmap). */
export class GpuHistory {
  constructor(readonly capacity = HISTORY_SAMPLES) {}

  /** host -> its GPUs' series, by index. */
  readonly series = new Map<string, GpuSeries[]>();
  /** host -> its latest samples, by GPU index. */
  readonly latest = new Map<string, GpuSample[]>();
  /** Epoch s of the latest samples. */
  latestT = NaN;

  seriesOf(host: string, index: number): GpuSeries {
    let list = this.series.get(host);
    if (!list) {
      list = [];
      this.series.set(host, list);
    }
    while (list.length <= index) {
      list.push(new GpuSeries(this.capacity));
    }
    return list[index];
  }

  /** A "gpus" message: each host's samples at one time. */
  addSamples(message: Pick<IGpusMessage, 't' | 'hosts'>): void {
    for (const [host, samples] of Object.entries(message.hosts || {})) {
      this.latest.set(host, samples);
      samples.forEach((sample, index) => {
        this.seriesOf(host, index).push(message.t, sample?.[UTIL], sample?.[MEM]);
      });
    }
    this.latestT = message.t;
  }

  /** A "gpu_history" message: points every step_s from t0, older than what we hold first. */
  seed(message: Pick<IGpuHistoryMessage, 't0' | 'step_s' | 'hosts'>): void {
    for (const [host, metrics] of Object.entries(message.hosts || {})) {
      const util = metrics.util || [];
      const mem = metrics.mem || [];
      const gpus = Math.max(util.length, mem.length);
      for (let index = 0; index < gpus; index++) {
        const u = util[index] || [];
        const m = mem[index] || [];
        const series = this.seriesOf(host, index);
        const points = Math.max(u.length, m.length);
        // The ring keeps the newest `capacity` points: older ones would be dropped anyway.
        for (let j = Math.max(0, points - this.capacity); j < points; j++) {
          series.push(message.t0 + j * message.step_s, u[j], m[j]);
        }
      }
    }
  }

  /** Forget hosts no longer in the document. */
  keepOnly(hosts: Set<string>): void {
    for (const host of [...this.series.keys()]) {
      if (!hosts.has(host)) {
        this.series.delete(host);
        this.latest.delete(host);
      }
    }
  }
}

/**
 * A sparkline's points: x in 0..width over the last `windowS` seconds before `nowS`, y in
 * 0..height (0 at the top) for values 0..max; unknown values break the line (null).
 */
export function sparkPoints(
  times: RingBuffer,
  values: RingBuffer,
  nowS: number,
  windowS: number,
  max: number,
  width: number,
  height: number
): ([number, number] | null)[] {
  const out: ([number, number] | null)[] = [];
  const from = nowS - windowS;
  for (let i = 0; i < times.length; i++) {
    const t = times.get(i);
    if (t < from) {
      continue;
    }
    const v = values.get(i);
    if (isNaN(v) || !(max > 0)) {
      out.push(null);
      continue;
    }
    const x = ((t - from) / windowS) * width;
    const y = height - Math.min(1, Math.max(0, v / max)) * height;
    out.push([x, y]);
  }
  return out;
}
