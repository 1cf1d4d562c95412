/**
 * What the panel shows of each host's GPUs (pure: no DOM): rows with their latest sample,
 * throttle reasons, errors, the ranks' memory, and the nodes x GPUs heatmap at scale.
 */
import type { GpuSample, IGpu, IHostStatus, ILiveGpuInfo } from './api';

/** Positions in a GpuSample. */
export const UTIL = 0;
export const MEM = 1;
export const TEMP = 2;
export const POWER = 3;
export const THROTTLE = 4;
export const XID = 5;
export const ECC = 6;

/** NVML clocks event reasons: [bit, name, worth a warning]. */
export const THROTTLE_REASONS: [number, string, boolean][] = [
  [0x1, 'idle', false],
  [0x2, 'applications clocks', false],
  [0x4, 'SW power cap', true],
  [0x8, 'HW slowdown', true],
  [0x20, 'sync boost', false],
  [0x40, 'SW thermal', true],
  [0x80, 'HW thermal', true],
  [0x100, 'HW power brake', true],
  [0x200, 'display clocks', false]
];

export interface IThrottle {
  /** The reasons in bit order; unknown bits as "0x400". */
  reasons: string[];
  /** A reason that slows work: power cap, slowdown, thermal, power brake, or an unknown bit. */
  slowing: boolean;
}

export function decodeThrottle(bits: number | null | undefined): IThrottle {
  if (!bits) {
    return { reasons: [], slowing: false };
  }
  const reasons: string[] = [];
  let slowing = false;
  let left = bits;
  for (const [bit, name, warn] of THROTTLE_REASONS) {
    if (bits & bit) {
      reasons.push(name);
      slowing = slowing || warn;
      left &= ~bit;
    }
  }
  for (let bit = 1; left !== 0 && bit <= 0x40000000; bit *= 2) {
    if (left & bit) {
      reasons.push(`0x${bit.toString(16)}`);
      slowing = true;
      left &= ~bit;
    }
  }
  return { reasons, slowing };
}

/** "XID 79", "2 uncorrected ECC errors": what deserves a red mark. */
export function gpuErrors(sample: GpuSample | undefined): string[] {
  const errors: string[] = [];
  if (!sample) {
    return errors;
  }
  const xid = sample[XID];
  const ecc = sample[ECC];
  if (xid) {
    errors.push(`XID ${xid}`);
  }
  if (ecc) {
    errors.push(`${ecc} uncorrected ECC error${ecc === 1 ? '' : 's'}`);
  }
  return errors;
}

export function gib(mib: number): string {
  return (mib / 1024).toFixed(1);
}

function fraction(part: number | null | undefined, whole: number | null | undefined): number | null {
  if (part === null || part === undefined || !whole || whole <= 0) {
    return null;
  }
  return Math.min(1, Math.max(0, part / whole));
}

export interface IGpuProcess {
  rank: number | null;
  pid: number;
  mib: number | null;
  /** "rank 3: 12.0 GiB", "pid 4242: 1.2 GiB" */
  text: string;
}

export interface IGpuView {
  index: number;
  label: string;
  name: string;
  util: number | null;
  utilFraction: number | null;
  utilText: string;
  memUsed: number | null;
  memTotal: number | null;
  memFraction: number | null;
  memText: string;
  tempText: string;
  powerText: string;
  powerFraction: number | null;
  throttle: IThrottle;
  errors: string[];
  processes: IGpuProcess[];
}

export type HostGpuState = 'live' | 'inventory' | 'nogpu' | 'unknown';

export interface IHostGpuView {
  host: string;
  state: HostGpuState;
  /** "no GPUs", the sampler's error, "GPUs not sampled"... ("" when all is well). */
  message: string;
  /** "4 × NVIDIA H100 80GB HBM3" */
  models: string;
  gpus: IGpuView[];
}

function processesOf(host: IHostStatus, index: number): IGpuProcess[] {
  const all = host.live_gpus?.processes || [];
  return all
    .filter(p => p[0] === index)
    .map(([, rank, pid, mib]) => ({
      rank,
      pid,
      mib,
      text: `${rank === null ? `pid ${pid}` : `rank ${rank}`}: ${mib === null ? '?' : gib(mib)} GiB`
    }))
    .sort((a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity) || a.pid - b.pid);
}

function memText(used: number | null, total: number | null): string {
  if (used === null && total === null) {
    return 'memory n/a';
  }
  return `${used === null ? '?' : gib(used)} / ${total === null ? '?' : gib(total)} GiB`;
}

function liveGpu(host: IHostStatus, info: ILiveGpuInfo, sample: GpuSample | undefined): IGpuView {
  const util = sample ? sample[UTIL] : null;
  const used = sample ? sample[MEM] : null;
  const temp = sample ? sample[TEMP] : null;
  const power = sample ? sample[POWER] : null;
  const total = info.memory_total_mib;
  const limit = info.power_limit_w;
  return {
    index: info.index,
    label: `GPU${info.index}`,
    name: info.name || 'unknown model',
    util,
    utilFraction: fraction(util, 100),
    utilText: util === null ? 'util n/a' : `${Math.round(util)}% util`,
    memUsed: used,
    memTotal: total,
    memFraction: fraction(used, total),
    memText: memText(used, total),
    tempText: temp === null ? '' : `${Math.round(temp)} °C`,
    powerText:
      power === null ? '' : `${Math.round(power)}${limit ? ` / ${Math.round(limit)}` : ''} W`,
    powerFraction: fraction(power, limit),
    throttle: decodeThrottle(sample ? sample[THROTTLE] : null),
    errors: gpuErrors(sample),
    processes: processesOf(host, info.index)
  };
}

function inventoryGpu(gpu: IGpu): IGpuView {
  return {
    index: gpu.index,
    label: `GPU${gpu.index}`,
    name: gpu.name || 'unknown model',
    util: gpu.utilization_pct,
    utilFraction: fraction(gpu.utilization_pct, 100),
    utilText: gpu.utilization_pct === null ? 'util n/a' : `${gpu.utilization_pct}% util`,
    memUsed: gpu.memory_used_mib,
    memTotal: gpu.memory_total_mib,
    memFraction: fraction(gpu.memory_used_mib, gpu.memory_total_mib),
    memText: memText(gpu.memory_used_mib, gpu.memory_total_mib),
    tempText: '',
    powerText: '',
    powerFraction: null,
    throttle: { reasons: [], slowing: false },
    errors: [],
    processes: []
  };
}

/** The sampler's GPUs of a host (or, without one, its last inventory), with their samples. */
export function hostGpuView(host: IHostStatus, samples: GpuSample[] | undefined): IHostGpuView {
  const live = host.live_gpus;
  if (live) {
    if (live.gpus.length === 0) {
      return { host: host.name, state: 'nogpu', message: live.error || 'no GPUs', models: '', gpus: [] };
    }
    const gpus = live.gpus.map((info, i) => liveGpu(host, info, samples?.[info.index ?? i]));
    return {
      host: host.name,
      state: 'live',
      message: live.error || '',
      models: summariseModels(live.gpus),
      gpus
    };
  }
  const inventory = host.gpus;
  if (!inventory) {
    return { host: host.name, state: 'unknown', message: 'GPUs not sampled', models: '', gpus: [] };
  }
  if (inventory.gpus.length === 0) {
    return { host: host.name, state: 'nogpu', message: inventory.error || 'no GPUs', models: '', gpus: [] };
  }
  return {
    host: host.name,
    state: 'inventory',
    message: inventory.error || '',
    models: summariseModels(inventory.gpus),
    gpus: inventory.gpus.map(inventoryGpu)
  };
}

function summariseModels(gpus: { name: string | null }[]): string {
  const counts = new Map<string, number>();
  for (const gpu of gpus) {
    const model = gpu.name || 'unknown model';
    counts.set(model, (counts.get(model) || 0) + 1);
  }
  return [...counts.entries()].map(([model, n]) => `${n} × ${model}`).join(', ');
}

// ---------------------------------------------------------------- the heatmap

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
  /** rows * columns: 1 where the GPU reports XID or ECC errors. */
  errors: Uint8Array;
  /** rows * columns: the value in its unit ("97% util"), "" where none. */
  labels: string[];
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
  const errors = new Uint8Array(rows.length * columns);
  const labels: string[] = new Array(rows.length * columns).fill('');
  rows.forEach((host, r) => {
    const samples = latest.get(host.name) || [];
    const infos = host.live_gpus?.gpus || [];
    const count = Math.max(samples.length, infos.length);
    for (let c = 0; c < count; c++) {
      const info = infos.find(g => g.index === c) ?? infos[c];
      const [value, label] = metricValue(samples[c], info, metric);
      values[r * columns + c] = value;
      labels[r * columns + c] = label;
      errors[r * columns + c] = gpuErrors(samples[c]).length > 0 ? 1 : 0;
    }
  });
  return { metric, hosts: rows.map(h => h.name), columns, values, errors, labels };
}

/** "worker3 GPU5: 97% util" for a cell, or null outside the grid. */
export function heatCellText(map: IHeatmap, row: number, col: number): string | null {
  if (row < 0 || col < 0 || row >= map.hosts.length || col >= map.columns) {
    return null;
  }
  const label = map.labels[row * map.columns + col];
  const error = map.errors[row * map.columns + col] ? ' (errors)' : '';
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
const STOPS: [number, number, number][] = [
  [237, 248, 251],
  [158, 202, 225],
  [66, 146, 198],
  [8, 81, 156],
  [63, 0, 125]
];

/** The colour of a 0..1 value; NaN: a neutral grey. */
export function heatColor(value: number): string {
  if (isNaN(value)) {
    return 'rgb(128,128,128)';
  }
  const v = clamp01(value) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(v));
  const t = v - i;
  const [a, b] = [STOPS[i], STOPS[i + 1]];
  const mix = (k: number) => Math.round(a[k] + (b[k] - a[k]) * t);
  return `rgb(${mix(0)},${mix(1)},${mix(2)})`;
}
