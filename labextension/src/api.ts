/**
 * The server extension's API: the snapshot's shape and the two requests the panel makes.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface IGpu {
  index: number;
  name: string | null;
  memory_total_mib: number | null;
  memory_used_mib: number | null;
  utilization_pct: number | null;
}

export interface IEngine {
  rank: number | null;
  engine_id: number | null;
  state: string | null;
  world_pid: number | null;
}

/** One host's GPU inventory (null when it was not probed). */
export interface IHostGpus {
  source: string;
  gpus: IGpu[];
  nics: string[];
  error: string | null;
}

/** One host row: as `mlp-magic status --json` prints it. */
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
}

export interface IWorld {
  pid: number;
  np?: number;
  mpi?: string | null;
  started_at?: string;
}

/** The cluster's one JSON document (cluster/model.py ClusterState.to_json). */
export interface IClusterSnapshot {
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
 * The request failed because the server has no such route: the server extension is absent.
 */
export class ServerExtensionMissing extends Error {
  constructor() {
    super(
      'The mlp_magic server extension is not enabled on this Jupyter server. ' +
        'Install mlp_magic in the environment that runs the server, then ' +
        '"jupyter server extension enable mlp_magic.server" and restart it.'
    );
    this.name = 'ServerExtensionMissing';
  }
}

const CLUSTER_PATH = ['mlp-magic', 'cluster'];

async function requestSnapshot(
  path: string[],
  init: RequestInit
): Promise<IClusterSnapshot> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, ...path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  if (response.status === 404) {
    throw new ServerExtensionMissing();
  }
  if (!response.ok) {
    throw await ServerConnection.ResponseError.create(response);
  }
  return (await response.json()) as IClusterSnapshot;
}

/** The current snapshot (the server caches it for a few seconds). */
export function fetchCluster(): Promise<IClusterSnapshot> {
  return requestSnapshot(CLUSTER_PATH, { method: 'GET' });
}

/** Ask the server to drop its cached snapshot and take a new one now. */
export function refreshCluster(): Promise<IClusterSnapshot> {
  return requestSnapshot([...CLUSTER_PATH, 'refresh'], { method: 'POST' });
}
