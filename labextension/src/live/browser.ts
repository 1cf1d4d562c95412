/**
 * The browser's socket, request, timers and clock for the connection (connection.ts takes them
 * through ILiveEnv, so that its tests can give fakes instead).
 */
import type { ILiveEnv, ISocketLike } from './connection';
import { defaultLiveSocketUrl, fetchCluster } from './routes';

export function browserEnv(): ILiveEnv {
  return {
    openSocket: () => new WebSocket(defaultLiveSocketUrl()) as unknown as ISocketLike,
    fetchDoc: fetchCluster,
    setTimeout: (callback, ms) => window.setTimeout(callback, ms),
    clearTimeout: handle => window.clearTimeout(handle as number),
    now: () => Date.now(),
    isHidden: () => document.hidden
  };
}
