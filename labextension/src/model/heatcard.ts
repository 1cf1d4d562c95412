/**
 * What the heatmap's hover card says of one cell (pure: no DOM): the host and GPU, the value of
 * every metric with its unit, the cell's marks and what they mean, and which rank holds what
 * memory on that GPU (the sampler's compute processes, mapped to ranks by pid).
 */
import { hostGpuView } from './gpus';
import { IHeatmap } from './heatmap';
import { MarkShape } from './heatmarks';

export interface IHeatCard {
  host: string;
  gpu: number;
  /** "127.0.1.3 · GPU5" */
  title: string;
  /** "NVIDIA H100 80GB HBM3" ("" when unknown). */
  model: string;
  /** [metric, value with its unit]: utilisation, memory, temperature, power. */
  metrics: [string, string][];
  /** [shape, what it means here]: "clocks slowed: SW power cap", "XID 79"... */
  marks: [MarkShape, string][];
  /** "rank 3: 12.0 GiB", "pid 4242: 1.2 GiB"; none: `memoryNote` says why. */
  memoryByRank: string[];
  memoryNote: string;
}

/** The card of the cell at (row, col), or null where the grid has no such GPU. */
export function heatCard(map: IHeatmap, row: number, col: number): IHeatCard | null {
  const source = map.rowHosts[row];
  if (!source || col < 0 || col >= map.columns) {
    return null;
  }
  const view = hostGpuView(source, map.rowSamples[row]);
  const gpu = view.gpus.find(g => g.index === col);
  const title = `${source.name} · GPU${col}`;
  if (!gpu) {
    const none: IHeatCard = { host: source.name, gpu: col, title, model: '', metrics: [], marks: [], memoryByRank: [], memoryNote: '' };
    return { ...none, memoryNote: `${source.name} has no GPU${col}` };
  }
  const marks: [MarkShape, string][] = [];
  if (gpu.throttle.slowing) {
    marks.push(['triangle', `clocks slowed: ${gpu.throttle.reasons.join(', ')}`]);
  }
  for (const error of gpu.errors) {
    marks.push([error.startsWith('XID') ? 'dot' : 'cross', error]);
  }
  const memFraction = gpu.memFraction === null ? '' : ` (${Math.round(gpu.memFraction * 100)} %)`;
  const processes = gpu.processes.map(p => p.text);
  return {
    host: source.name,
    gpu: col,
    title,
    model: gpu.name,
    metrics: [
      ['utilisation', gpu.util === null ? 'n/a' : `${Math.round(gpu.util)} %`],
      ['memory', gpu.memUsed === null ? 'n/a' : `${gpu.memText}${memFraction}`],
      ['temperature', gpu.tempText || 'n/a'],
      ['power', gpu.powerText || 'n/a']
    ],
    marks,
    memoryByRank: processes,
    memoryNote: processes.length ? '' : memoryNote(view.state)
  };
}

function memoryNote(state: string): string {
  return state === 'live'
    ? 'no compute process on this GPU'
    : 'memory by rank: needs the live sampler (last probe only)';
}

/** The card as plain text (tests, the canvas's accessible description). */
export function heatCardText(card: IHeatCard): string {
  return [
    card.title + (card.model ? ` (${card.model})` : ''),
    ...card.metrics.map(([name, value]) => `${name}: ${value}`),
    ...card.marks.map(([, text]) => text),
    ...(card.memoryByRank.length ? [`memory by rank: ${card.memoryByRank.join(', ')}`] : []),
    ...(card.memoryNote ? [card.memoryNote] : [])
  ].join('\n');
}
