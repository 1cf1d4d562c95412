/**
 * The nodes x GPUs heatmap of every host's latest samples (pure: no DOM): one row per host, one
 * column per GPU, a metric's value as a colour, each cell's marks (heatmarks.ts), and the text of
 * each cell. Its axes are heataxes.ts, its legend heatlegend.ts, its hover card heatcard.ts.
 */
import type { GpuSample, IHostStatus, ILiveGpuInfo } from './documents';
import { memText, MEM, POWER, TEMP, UTIL } from './gpus';
import { cellMarks, MARK_ECC, MARK_XID } from './heatmarks';

export type HeatMetric = 'util' | 'memory' | 'temperature' | 'power';

export const HEAT_METRICS: [HeatMetric, string][] = [
  ['util', 'utilisation'],
  ['memory', 'memory'],
  ['temperature', 'temperature'],
  ['power', 'power']
];

/** Temperatures are drawn from TEMP_LOW (lightest) to TEMP_HIGH (darkest), in °C. */
export const TEMP_LOW = 30;
export const TEMP_HIGH = 90;

export interface IHeatmap {
  metric: HeatMetric;
  hosts: string[];
  columns: number;
  /** rows * columns: 0..1, NaN where no value (no such GPU, or unknown). */
  values: Float32Array;
  /** rows * columns: the cell's marks (heatmarks.ts MARK_*: throttled, XID, ECC), 0 for none. */
  marks: Uint8Array;
  /** rows * columns: the value in its unit ("97% util"), "" where none. */
  labels: string[];
  /** The rows' host documents and latest samples (for the hover card). */
  rowHosts: IHostStatus[];
  rowSamples: GpuSample[][];
  /** The memory total (MiB) and power limit (W) every GPU shares; null when they differ or are unknown. */
  memoryTotalMib: number | null;
  powerLimitW: number | null;
}

/** A metric's value as 0..1 for the colour, and as text, for one GPU's sample. */
export function metricValue(
  sample: GpuSample | undefined,
  info: ILiveGpuInfo | undefined,
  metric: HeatMetric
): [number, string] {
  const at = (i: number) => (sample && sample[i] !== null && sample[i] !== undefined ? (sample[i] as number) : null);
  switch (metric) {
    case 'util': {
      const v = at(UTIL);
      return v === null ? [NaN, ''] : [clamp01(v / 100), `${Math.round(v)}% util`];
    }
    case 'memory': {
      const v = at(MEM);
      const total = info?.memory_total_mib;
      if (v === null) {
        return [NaN, ''];
      }
      return [total ? clamp01(v / total) : NaN, memText(v, total ?? null)];
    }
    case 'temperature': {
      const v = at(TEMP);
      return v === null
        ? [NaN, '']
        : [clamp01((v - TEMP_LOW) / (TEMP_HIGH - TEMP_LOW)), `${Math.round(v)} °C`];
    }
    case 'power': {
      const v = at(POWER);
      const limit = info?.power_limit_w;
      if (v === null) {
        return [NaN, ''];
      }
      return [limit ? clamp01(v / limit) : NaN, `${Math.round(v)}${limit ? ` / ${Math.round(limit)}` : ''} W`];
    }
  }
}

function clamp01(v: number): number {
  return Math.min(1, Math.max(0, v));
}

/** Nodes x GPUs: one row per host with GPUs (hosts in document order), one column per index. */
export function heatmapModel(
  hosts: IHostStatus[],
  latest: Map<string, GpuSample[]>,
  metric: HeatMetric
): IHeatmap {
  const rows = hosts.filter(h => (h.live_gpus?.gpus.length ?? 0) > 0 || (latest.get(h.name)?.length ?? 0) > 0);
  const columns = rows.reduce(
    (n, h) => Math.max(n, h.live_gpus?.gpus.length ?? 0, latest.get(h.name)?.length ?? 0),
    0
  );
  const values = new Float32Array(rows.length * columns).fill(NaN);
  const marks = new Uint8Array(rows.length * columns);
  const labels: string[] = new Array(rows.length * columns).fill('');
  const rowSamples = rows.map(host => latest.get(host.name) || []);
  rows.forEach((host, r) => {
    const samples = rowSamples[r];
    const infos = host.live_gpus?.gpus || [];
    const count = Math.max(samples.length, infos.length);
    for (let c = 0; c < count; c++) {
      const info = infos.find(g => g.index === c) ?? infos[c];
      const [value, label] = metricValue(samples[c], info, metric);
      values[r * columns + c] = value;
      labels[r * columns + c] = label;
      marks[r * columns + c] = cellMarks(samples[c]);
    }
  });
  const allInfos = ([] as ILiveGpuInfo[]).concat(...rows.map(h => h.live_gpus?.gpus || []));
  return {
    metric,
    hosts: rows.map(h => h.name),
    columns,
    values,
    marks,
    labels,
    rowHosts: rows,
    rowSamples,
    memoryTotalMib: shared(allInfos.map(g => g.memory_total_mib)),
    powerLimitW: shared(allInfos.map(g => g.power_limit_w))
  };
}

/** The one value all of `values` have, or null (none, an unknown one, or two different). */
function shared(values: (number | null)[]): number | null {
  const first = values[0];
  return first && values.every(v => v === first) ? first : null;
}

/** "worker3 GPU5: 97% util" for a cell, or null outside the grid. */
export function heatCellText(map: IHeatmap, row: number, col: number): string | null {
  if (row < 0 || col < 0 || row >= map.hosts.length || col >= map.columns) {
    return null;
  }
  const label = map.labels[row * map.columns + col];
  const error = map.marks[row * map.columns + col] & (MARK_XID | MARK_ECC) ? ' (errors)' : '';
  return `${map.hosts[row]} GPU${col}: ${label || 'no data'}${error}`;
}

/** The cell under a point of a grid drawn from (0, 0) with cells of w x h. */
export function cellAt(
  map: IHeatmap,
  x: number,
  y: number,
  w: number,
  h: number
): { row: number; col: number } | null {
  const row = Math.floor(y / h);
  const col = Math.floor(x / w);
  if (x < 0 || y < 0 || row >= map.hosts.length || col >= map.columns) {
    return null;
  }
  return { row, col };
}

/** Colour stops (light to dark blue-purple), readable on light and dark themes. */
export const HEAT_STOPS: [number, number, number][] = [
  [237, 248, 251],
  [158, 202, 225],
  [66, 146, 198],
  [8, 81, 156],
  [63, 0, 125]
];

/** The colour of a cell without a value (no such GPU, no sample yet). */
export const NO_VALUE_COLOR = 'rgb(128,128,128)';

/** The colour of a 0..1 value; NaN: a neutral grey. */
export function heatColor(value: number): string {
  if (isNaN(value)) {
    return NO_VALUE_COLOR;
  }
  const v = clamp01(value) * (HEAT_STOPS.length - 1);
  const i = Math.min(HEAT_STOPS.length - 2, Math.floor(v));
  const t = v - i;
  const [a, b] = [HEAT_STOPS[i], HEAT_STOPS[i + 1]];
  const mix = (k: number) => Math.round(a[k] + (b[k] - a[k]) * t);
  return `rgb(${mix(0)},${mix(1)},${mix(2)})`;
}
