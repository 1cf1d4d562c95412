/**
 * What the panel shows, computed from a snapshot (no DOM here).
 */
import { IClusterSnapshot, IEngine, IGpu, IHostStatus } from './api';

/** [0, 1, 2, 3, 5] -> "0-3,5" */
export function foldRanks(ranks: number[]): string {
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  const parts: string[] = [];
  let start = 0;
  for (let i = 1; i <= sorted.length; i++) {
    if (i === sorted.length || sorted[i] !== sorted[i - 1] + 1) {
      const first = sorted[start];
      const last = sorted[i - 1];
      parts.push(first === last ? `${first}` : `${first}-${last}`);
      start = i;
    }
  }
  return parts.join(',');
}

export interface IHostRow {
  name: string;
  slots: number | null;
  ranks: string;
  reachable: 'yes' | 'no' | 'unknown';
  reachableDetail: string;
  engines: string;
  gpus: IGpuBar[];
  gpuModels: string;
}

export interface IGpuBar {
  label: string;
  model: string;
  memoryFraction: number | null;
  memoryText: string;
  utilizationFraction: number | null;
  utilizationText: string;
}

/** "3 idle\n1 busy" from the engines of one host; "" when no World is up there. */
export function summariseEngines(engines: IEngine[]): string {
  const counts = new Map<string, number>();
  for (const engine of engines) {
    const state = engine.state || 'unknown';
    counts.set(state, (counts.get(state) || 0) + 1);
  }
  return [...counts.entries()].map(([state, n]) => `${n} ${state}`).join('\n');
}

function fraction(part: number | null, whole: number | null): number | null {
  if (part === null || whole === null || whole <= 0) {
    return null;
  }
  return Math.min(1, Math.max(0, part / whole));
}

function gibibytes(mib: number): string {
  return (mib / 1024).toFixed(1);
}

export function gpuBar(gpu: IGpu): IGpuBar {
  const memoryKnown =
    gpu.memory_used_mib !== null && gpu.memory_total_mib !== null;
  return {
    label: `GPU${gpu.index}`,
    model: gpu.name || 'unknown model',
    memoryFraction: fraction(gpu.memory_used_mib, gpu.memory_total_mib),
    memoryText: memoryKnown
      ? `${gibibytes(gpu.memory_used_mib as number)} / ${gibibytes(gpu.memory_total_mib as number)} GiB`
      : 'memory n/a',
    utilizationFraction: fraction(gpu.utilization_pct, 100),
    utilizationText:
      gpu.utilization_pct === null ? 'util n/a' : `${gpu.utilization_pct}% util`
  };
}

function reachability(host: IHostStatus | undefined): Pick<IHostRow, 'reachable' | 'reachableDetail'> {
  if (!host || host.reachable === null) {
    return { reachable: 'unknown', reachableDetail: 'not probed' };
  }
  if (host.reachable) {
    const ms = host.probe_ms ? ` (${Math.round(host.probe_ms)} ms)` : '';
    return { reachable: 'yes', reachableDetail: `reachable${ms}` };
  }
  return { reachable: 'no', reachableDetail: host.error || 'unreachable' };
}

/** "4 × NVIDIA H100 80GB HBM3" (one entry per model, in index order). */
export function summariseModels(gpus: IGpu[]): string {
  const counts = new Map<string, number>();
  for (const gpu of gpus) {
    const model = gpu.name || 'unknown model';
    counts.set(model, (counts.get(model) || 0) + 1);
  }
  return [...counts.entries()].map(([model, n]) => `${n} × ${model}`).join(', ');
}

/** One row per host of the topology, in hostfile order. */
export function hostRows(snapshot: IClusterSnapshot): IHostRow[] {
  return snapshot.hosts.map(host => {
    const gpus = host.gpus ? host.gpus.gpus : [];
    return {
      name: host.name,
      slots: host.slots,
      ranks: foldRanks(host.ranks),
      ...reachability(host),
      engines: summariseEngines(host.engines),
      gpus: gpus.map(gpuBar),
      gpuModels: summariseModels(gpus)
    };
  });
}

/** "updated 14:03:27" in the viewer's local time. */
export function updatedText(snapshot: IClusterSnapshot): string {
  const when = new Date(snapshot.updated_at);
  if (isNaN(when.getTime())) {
    return `updated ${snapshot.updated_at}`;
  }
  return `updated ${when.toLocaleTimeString()}`;
}

export function worldsText(snapshot: IClusterSnapshot): string {
  if (snapshot.worlds.length === 0) {
    return 'No World running (start one with %%mpirun in a notebook).';
  }
  return snapshot.worlds
    .map(w => `World of kernel ${w.pid}: ${w.np ?? '?'} ranks${w.mpi ? ', ' + w.mpi : ''}`)
    .join('; ');
}
