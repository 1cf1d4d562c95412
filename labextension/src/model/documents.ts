/**
 * The cluster document the server writes (GET mlp-magic/cluster, and the websocket's snapshot):
 * cluster/model.py ClusterState.to_json, with each host's live_gpus added by cluster/live.py.
 *
 * labextension/test/samples/*.json are documents the Python code writes
 * (tests/unit/test_panel_samples.py); the tests type-check them against these types, so a field
 * Python drops or changes the type of fails `jlpm lint:types`.
 */

/** One GPU of a host's inventory (gpu/model.py GpuInfo; the values of its last probe). */
export interface IGpu {
  index: number;
  name: string | null;
  pci_bus_id?: string | null;
  memory_total_mib: number | null;
  memory_used_mib: number | null;
  utilization_pct: number | null;
  numa_node?: number | null;
  cpu_affinity?: string | null;
}

/**
 * Which engine of a World runs a rank on this host (cluster/model.py EngineInfo). Its state is
 * the World's rank's (said once, in the World); records of older servers carry their own.
 */
export interface IEngine {
  rank: number | null;
  engine_id: number | null;
  world_pid: number | null;
  state?: string | null;
}

/** One host's GPU inventory (gpu/model.py HostGpus.to_dict; in a host row, without "host"). */
export interface IHostGpus {
  host?: string;
  source: string;
  gpus: IGpu[];
  nics: string[];
  /** links[a][b]: the link type between devices a and b ("X" on the diagonal, "NV18", "PIX"...). */
  links?: { [device: string]: { [device: string]: string } };
  error: string | null;
}

/** One GPU as the host's sampler describes it (the static part; cluster/gpu_feed.py GPU_FACTS). */
export interface ILiveGpuInfo {
  index: number;
  name: string | null;
  memory_total_mib: number | null;
  power_limit_w: number | null;
}

/** [gpu_index, rank | null, pid, used_mib]: a compute process on a GPU. */
export type GpuProcess = [number, number | null, number, number | null];

/**
 * What a host's sampler (its agent) says (cluster/gpu_feed.py live_gpus). The source is null
 * when the agent could not be reached or ended: its error says why.
 */
export interface ILiveGpus {
  source: 'nvml' | 'replay' | 'none' | string | null;
  error: string | null;
  gpus: ILiveGpuInfo[];
  processes: GpuProcess[];
}

/** core/doctor.health_by_host: the worst finding of the last doctor run, and their titles. */
export interface IHostHealth {
  state: 'ok' | 'warning' | 'error' | string;
  findings: string[];
  /** Epoch seconds of the run (null: a report that does not say). */
  checked_at: number | null;
}

/** One host row (cluster/model.py HostView.to_json, as `mlp-magic status --json` prints it). */
export interface IHostStatus {
  name: string;
  slots: number;
  index: number;
  ranks: number[];
  reachable: boolean | null;
  probe_ms: number | null;
  error: string | null;
  gpus: IHostGpus | null;
  hints: string[];
  engines: IEngine[];
  /** Null: no sampler follows this host (no World's agent runs there). */
  live_gpus: ILiveGpus | null;
  /** The last `mlp-magic doctor` run's verdict on this host (null: never checked). */
  health: IHostHealth | null;
}

/**
 * A rank's state (world/pure/rank_states.py STATES): `paused` while it is stopped at a breakpoint
 * inside a cell (`%mpirun --pdb c` moves it on), waiting for the user, not late.
 */
export type RankState = 'starting' | 'idle' | 'busy' | 'paused' | 'dead';

/** One rank of a World (core/rank_states.py RankState.to_json). Times are ISO 8601 of the server's clock. */
export interface IRank {
  rank: number;
  host: string;
  state: RankState | string | null;
  since?: string | null;
  last_output?: string | null;
  engine_id?: number | null;
}

/** The World's running cell (world/live.py LiveWorld.cell_started). */
export interface ICell {
  first_line: string;
  started: string;
  ranks: number[];
  log_dir?: string;
}

/** The World's last `%%mpirun --profile` (world/live.py LiveWorld.profiled). */
export interface IProfile {
  at: string;
  /** The report's lines, as the notebook showed them. */
  lines: string[];
  straggler: number | null;
  /** Where its samples are (a speedscope file, and a rank-N.txt a rank). */
  folder: string;
}

/** One of a World's agents (world/agents.py): where it listens, or why it did not start. */
export type WorldAgent = { addr: string; port: number; pid: number } | { error: string };

/**
 * A World's record (world/world.py World.state, published by world/published.py). All but the
 * pid are optional: the records of kernels running other versions are shown as they are.
 */
export interface IWorld {
  /** "<kernel host>-<kernel pid>-<n>"; older servers publish no id (the pid names the World). */
  id?: string;
  pid: number;
  host?: string;
  state?: 'starting' | 'running' | 'stopped' | string;
  np?: number;
  mpi?: string | null;
  source?: string;
  /** Ranks that died while the others ran on (Open MPI's ULFM); their rows say "dead". */
  dead_ranks?: number[];
  /** Null while the World starts. */
  started_at?: string | null;
  updated_at?: string;
  cell?: ICell | null;
  /** The last profiled cell's report (absent before the first). */
  profile?: IProfile | null;
  /** The running or last cell's logs (null before the first cell). */
  log_dir?: string | null;
  ranks?: IRank[];
  gpus?: { [host: string]: IHostGpus };
  /** The World's own processes (its controller and launcher). */
  processes?: { pid: number; create_time: number | null }[];
  agents?: { [host: string]: WorldAgent };
  /** Marked to outlive its kernel (`%mpirun --keep`); with no kernel, stopped after `keep_hours`. */
  kept?: boolean;
  keep_hours?: number | null;
  /** Since when a kept World has had no kernel (null while one drives it). */
  idle_since?: string | null;
  /** Whether the kernel that drives it lives ("gone": kept, waiting for `%mpirun --attach`). */
  kernel?: 'alive' | 'gone' | string;
}

/** The cluster's one JSON document (cluster/model.py ClusterState.to_json). */
export interface IClusterDoc {
  /** Null with `error`: no topology could be read. */
  source: string | null;
  master_addr: string | null;
  is_local: boolean;
  total_slots: number;
  hosts: IHostStatus[];
  worlds: IWorld[];
  error: string | null;
  updated_at: string;
}

/**
 * One GPU's sample: [util_pct, mem_used_mib, temp_c, power_w, throttle_bits, xid,
 * ecc_uncorrected] (core/gpu_history.py METRICS), each null when unknown.
 */
export type GpuSample = (number | null)[];
