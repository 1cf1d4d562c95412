/**
 * The host table's rows (pure: no DOM): slots, ranks, reachability, engines by state and the
 * last doctor run's health of each host.
 */
import type { IClusterDoc, IEngine, IHostStatus, IWorld } from './documents';
import { foldRanks } from './format';

// ---------------------------------------------------------------- the host table

export interface IHostRow {
  name: string;
  slots: number | null;
  ranks: string;
  reachable: 'yes' | 'no' | 'unknown';
  reachableDetail: string;
  engines: string;
  health: 'ok' | 'warning' | 'error' | 'unknown';
  healthDetail: string;
}

/** Each rank's state by "<world pid>/<rank>": the document says a state once, in its World. */
export function rankStatesOf(worlds: IWorld[]): Map<string, string> {
  const states = new Map<string, string>();
  for (const world of worlds || []) {
    for (const rank of world.ranks || []) {
      if (rank.state) {
        states.set(`${world.pid}/${rank.rank}`, rank.state);
      }
    }
  }
  return states;
}

/** "3 idle\n1 busy" from the engines of one host; "" when no World is up there. An engine's
 * state is its World's rank state (``states``); an engine record of an older server has its own. */
export function summariseEngines(engines: IEngine[], states: Map<string, string> = new Map()): string {
  const counts = new Map<string, number>();
  for (const engine of engines || []) {
    const state = engine.state || states.get(`${engine.world_pid}/${engine.rank}`) || 'unknown';
    counts.set(state, (counts.get(state) || 0) + 1);
  }
  return [...counts.entries()].map(([state, n]) => `${n} ${state}`).join('\n');
}

function reachability(
  host: IHostStatus
): Pick<IHostRow, 'reachable' | 'reachableDetail'> {
  if (host.reachable === null || host.reachable === undefined) {
    return { reachable: 'unknown', reachableDetail: 'not probed' };
  }
  if (host.reachable) {
    const ms = host.probe_ms ? ` (${Math.round(host.probe_ms)} ms)` : '';
    return { reachable: 'yes', reachableDetail: `reachable${ms}` };
  }
  return { reachable: 'no', reachableDetail: host.error || 'unreachable' };
}

/** The host's verdict in the last `mlp-magic doctor` run, and its findings as a tooltip. */
export function healthOf(host: IHostStatus): Pick<IHostRow, 'health' | 'healthDetail'> {
  const health = host.health;
  if (!health || !['ok', 'warning', 'error'].includes(health.state)) {
    return { health: 'unknown', healthDetail: 'not checked: run mlp-magic doctor' };
  }
  const when = health.checked_at ? ` (doctor at ${new Date(health.checked_at * 1000).toLocaleTimeString()})` : '';
  const found = (health.findings || []).join(', ');
  return {
    health: health.state as IHostRow['health'],
    healthDetail: (health.state === 'ok' ? 'no finding' : `${health.state}: ${found}`) + when
  };
}

export function hostRow(host: IHostStatus, states: Map<string, string> = new Map()): IHostRow {
  return {
    name: host.name,
    slots: host.slots ?? null,
    ranks: foldRanks(host.ranks || []),
    ...reachability(host),
    engines: summariseEngines(host.engines, states),
    ...healthOf(host)
  };
}

/** "updated 14:03:27" in the viewer's local time. */
export function updatedText(doc: IClusterDoc): string {
  const when = new Date(doc.updated_at);
  if (isNaN(when.getTime())) {
    return `updated ${doc.updated_at}`;
  }
  return `updated ${when.toLocaleTimeString()}`;
}

