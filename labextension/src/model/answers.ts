/**
 * What the server's routes answer besides the document (server/handlers.py, server/actions.py,
 * core/gpu_history.py): the actions on a World and the GPU history's export.
 */
import type { GpuSample } from './documents';

/** POST .../interrupt and .../unblock: the ranks signalled, folded ("0-3,5"; "" for none), and
 * the hosts not reached with why; unblock's, in an Open MPI World, also names the idle ranks
 * sent the progress signal. */
export interface IInterruptAnswer {
  world: string | null;
  signalled: string;
  problems: { [host: string]: string };
  progressed?: string;
}

/** POST .../restart: whether the World's processes on this machine were stopped, and how many. */
export interface IRestartAnswer {
  world: string | null;
  stopped: boolean;
  processes: number;
}

/** POST .../stacks: the merged stack tree as text and HTML, or why none could be taken. */
export interface IStacks {
  text?: string;
  html?: string;
  error?: string;
}

/** One host's buffer (core/gpu_history.py GpuHistory.to_json): [epoch s, a sample per GPU]. */
export interface IHostGpuHistory {
  gpus: number;
  length: number;
  metrics: string[];
  samples: [number, GpuSample[]][];
}

/** GET mlp-magic/gpus/history?format=json (core/gpu_history.py history_json). */
export interface IGpuHistoryExport {
  /** The names of a sample's positions: util_pct, mem_used_mib, temp_c... */
  metrics: string[];
  hosts: { [host: string]: IHostGpuHistory };
}
