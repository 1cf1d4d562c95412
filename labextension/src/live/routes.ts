/**
 * The server extension's REST routes and websocket URL, under {base_url}mlp-magic/. Every
 * request goes through ServerConnection.makeRequest: it adds the token and the XSRF header like
 * any JupyterLab request.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { IInterruptAnswer, IRestartAnswer, IStacks } from '../model/answers';
import type { IClusterDoc } from '../model/documents';

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

let overrides: Partial<ServerConnection.ISettings> = {};

/**
 * Settings of every later request and socket, over what the page's config gives (the plain
 * dashboard page appends its token to the socket's URL: it may have no login cookie).
 */
export function useServerSettings(options: Partial<ServerConnection.ISettings>): void {
  overrides = { ...options };
}

function settings(): ServerConnection.ISettings {
  return ServerConnection.makeSettings(overrides);
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
export async function interruptWorld(worldId: string): Promise<IInterruptAnswer> {
  return (await worldPost(worldId, 'interrupt')) as IInterruptAnswer;
}

/** POST mlp-magic/worlds/{id}/unblock: end the hung collectives of the World's busy ranks. */
export async function unblockWorld(worldId: string): Promise<IInterruptAnswer> {
  return (await worldPost(worldId, 'unblock')) as IInterruptAnswer;
}

/** POST mlp-magic/worlds/{id}/restart: stop the World (the next %%mpirun starts anew). */
export async function restartWorld(worldId: string): Promise<IRestartAnswer> {
  return (await worldPost(worldId, 'restart')) as IRestartAnswer;
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

/** GET mlp-magic/dashboard: the plain page of the same view (Notebook 7 has no main-area tabs). */
export function dashboardUrl(): string {
  return routeUrl(settings().baseUrl, 'dashboard');
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
