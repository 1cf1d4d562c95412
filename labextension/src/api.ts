/**
 * The server extension's API: the document's shape, the websocket's messages and the REST
 * routes (every request through ServerConnection.makeRequest: it adds the token and the XSRF
 * header like any JupyterLab request).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** One GPU of a host's inventory (gpu/model.py GpuInfo; the values of its last probe). */
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

/** One GPU as the host's sampler describes it (the static part). */
export interface ILiveGpuInfo {
  index: number;
  name: string | null;
  memory_total_mib: number | null;
  power_limit_w: number | null;
}

/** [gpu_index, rank | null, pid, used_mib]: a compute process on a GPU. */
export type GpuProcess = [number, number | null, number, number | null];

/** What a host's sampler (its agent) says: null in the document when it has none. */
export interface ILiveGpus {
  source: 'nvml' | 'replay' | 'none' | string;
  error: string | null;
  gpus: ILiveGpuInfo[];
  processes: GpuProcess[];
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
  live_gpus?: ILiveGpus | null;
  /** The last `mlp-magic doctor` run's verdict on this host (absent: never checked). */
  health?: IHostHealth | null;
}

/** core/doctor.health_by_host: the worst finding of the last doctor run, and their titles. */
export interface IHostHealth {
  state: 'ok' | 'warning' | 'error' | string;
  findings: string[];
  checked_at: number | null;
}

export type RankState = 'starting' | 'idle' | 'busy' | 'dead';

/** One rank of a World. Times are ISO 8601 of the server's clock. */
export interface IRank {
  rank: number;
  host: string;
  state: RankState | string | null;
  since?: string | null;
  last_output?: string | null;
  engine_id?: number | null;
}

/** The World's running cell. */
export interface ICell {
  first_line: string;
  started: string;
  ranks: number[];
  log_dir?: string;
}

export interface IWorld {
  /** "<kernel host>-<kernel pid>-<n>"; older servers publish no id (the pid names the World). */
  id?: string;
  pid: number;
  host?: string;
  state?: 'starting' | 'running' | 'stopped' | string;
  np?: number;
  mpi?: string | null;
  source?: string;
  started_at?: string;
  updated_at?: string;
  cell?: ICell | null;
  ranks?: IRank[];
  gpus?: { [host: string]: IHostGpus };
  agents?: { [host: string]: { addr: string; port: number } };
}

/** The cluster's one JSON document (cluster/model.py ClusterState.to_json). */
export interface IClusterDoc {
  source: string | null;
  master_addr: string | null;
  is_local: boolean;
  total_slots: number;
  hosts: IHostStatus[];
  worlds: IWorld[];
  error: string | null;
  updated_at: string;
}

/** The old name of the document. */
export type IClusterSnapshot = IClusterDoc;

/** A key or a list index into the document. */
export type PathPart = string | number;

export type PatchOp = ['set', PathPart[], unknown] | ['del', PathPart[]];

/**
 * One GPU's sample: [util_pct, mem_used_mib, temp_c, power_w, throttle_bits, xid,
 * ecc_uncorrected], each null when unknown.
 */
export type GpuSample = (number | null)[];

export interface ISnapshotMessage {
  type: 'snapshot';
  seq: number;
  server_time: string;
  doc: IClusterDoc;
}

export interface IPatchMessage {
  type: 'patch';
  seq: number;
  server_time: string;
  ops: PatchOp[];
}

export interface IGpusMessage {
  type: 'gpus';
  seq: number;
  server_time: string;
  /** Epoch seconds of the samples. */
  t: number;
  hosts: { [host: string]: GpuSample[] };
}

export interface IGpuHistoryMessage {
  type: 'gpu_history';
  seq: number;
  server_time: string;
  step_s: number;
  t0: number;
  hosts: { [host: string]: { util?: (number | null)[][]; mem?: (number | null)[][] } };
}

export type LiveMessage =
  | ISnapshotMessage
  | IPatchMessage
  | IGpusMessage
  | IGpuHistoryMessage;

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

const PREFIX = 'mlp-magic';

/** The document and the server's clock when it answered (epoch ms; null: unknown). */
export interface IFetchedDoc {
  doc: IClusterDoc;
  serverTimeMs: number | null;
}

function settings(): ServerConnection.ISettings {
  return ServerConnection.makeSettings();
}

/** The URL of a route under {base_url}mlp-magic/ (parts are encoded). */
export function routeUrl(baseUrl: string, ...parts: string[]): string {
  return URLExt.join(baseUrl, PREFIX, ...parts.map(encodeURIComponent));
}

async function request(
  parts: string[],
  init: RequestInit,
  query = '',
  missingIsExtension = true
): Promise<Response> {
  const conn = settings();
  const url = routeUrl(conn.baseUrl, ...parts) + query;
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, conn);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  if (response.status === 404 && missingIsExtension) {
    throw new ServerExtensionMissing();
  }
  if (!response.ok) {
    throw await ServerConnection.ResponseError.create(response);
  }
  return response;
}

/** The server's clock from the response: its Date header (1 s resolution), else none. */
function serverTime(response: Response): number | null {
  const date = response.headers.get('Date');
  const ms = date ? Date.parse(date) : NaN;
  return isNaN(ms) ? null : ms;
}

async function documentFrom(response: Response): Promise<IFetchedDoc> {
  return { doc: (await response.json()) as IClusterDoc, serverTimeMs: serverTime(response) };
}

/** GET mlp-magic/cluster: the document. */
export async function fetchCluster(): Promise<IFetchedDoc> {
  return documentFrom(await request(['cluster'], { method: 'GET' }));
}

/** POST mlp-magic/cluster/refresh: hosts and reachability again now (rate-limited). */
export async function refreshCluster(): Promise<IFetchedDoc> {
  return documentFrom(await request(['cluster', 'refresh'], { method: 'POST' }));
}

/** A World's route; a 404 there means the World is gone, not the extension. */
async function worldPost(worldId: string, action: string): Promise<unknown> {
  const response = await request(['worlds', worldId, action], { method: 'POST' }, '', false);
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : {};
  } catch {
    return { text };
  }
}

/** POST mlp-magic/worlds/{id}/interrupt: SIGINT the World's running cell on all ranks. */
export function interruptWorld(worldId: string): Promise<unknown> {
  return worldPost(worldId, 'interrupt');
}

/** POST mlp-magic/worlds/{id}/restart: stop the World (the next %%mpirun starts anew). */
export function restartWorld(worldId: string): Promise<unknown> {
  return worldPost(worldId, 'restart');
}

export interface IStacks {
  text?: string;
  html?: string;
}

/** POST mlp-magic/worlds/{id}/stacks: the merged stack tree of every rank. */
export async function worldStacks(worldId: string): Promise<IStacks> {
  return (await worldPost(worldId, 'stacks')) as IStacks;
}

export type LogStream = 'stdout' | 'stderr';

/** GET mlp-magic/worlds/{id}/ranks/{rank}/log?stream=: the last 64 KiB of a rank's stream. */
export async function rankLog(
  worldId: string,
  rank: number,
  stream: LogStream
): Promise<string> {
  const response = await request(
    ['worlds', worldId, 'ranks', String(rank), 'log'],
    { method: 'GET' },
    `?stream=${stream}`,
    false
  );
  return response.text();
}

/** GET mlp-magic/gpus/history?format=csv|json[&host=H]: a link to the GPU history. */
export function historyExportUrl(format: 'csv' | 'json', host?: string): string {
  const query = `?format=${format}` + (host ? `&host=${encodeURIComponent(host)}` : '');
  return routeUrl(settings().baseUrl, 'gpus', 'history') + query;
}

/** The panel's websocket URL, with the token the way @jupyterlab/services adds it. */
export function liveSocketUrl(
  wsUrl: string,
  token: string,
  appendToken: boolean
): string {
  const url = URLExt.join(wsUrl, PREFIX, 'live');
  return appendToken && token !== '' ? `${url}?token=${encodeURIComponent(token)}` : url;
}

/** The websocket URL for this page's server settings. */
export function defaultLiveSocketUrl(): string {
  const conn = settings();
  return liveSocketUrl(conn.wsUrl, conn.token, conn.appendToken);
}

/** The message of an error for a person: the server's own message when it gave one. */
export function errorText(error: unknown): string {
  if (error instanceof ServerConnection.ResponseError) {
    const status = error.response.status;
    return `${status} ${error.response.statusText || ''}: ${error.message}`.trim();
  }
  return (error as Error)?.message || String(error);
}
