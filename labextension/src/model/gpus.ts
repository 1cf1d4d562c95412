/**
 * What the panel shows of each host's GPUs (pure: no DOM): rows with their latest sample,
 * throttle reasons, errors and the ranks' memory (heatmap.ts: the nodes x GPUs grid at scale).
 */
import type { GpuSample, IGpu, IHostStatus, ILiveGpuInfo } from './documents';

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

export function memText(used: number | null, total: number | null): string {
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
