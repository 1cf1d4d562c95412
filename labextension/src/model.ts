/**
 * What the panel shows of hosts, Worlds and ranks, computed from the document (pure: no DOM).
 * Times are compared with `nowMs`, the server's clock as the panel estimates it.
 */
import type {
  IClusterDoc,
  IEngine,
  IHostStatus,
  IRank,
  IWorld
} from './api';
import {
  ageSeconds,
  foldRanks,
  formatAge,
  median,
  parseTime,
  rankList,
  shortAge
} from './format';

// ---------------------------------------------------------------- the summary line

/** The order of states when counts tie, and in lists. */
export const STATE_ORDER = ['busy', 'idle', 'starting', 'dead'];

export function stateOf(rank: IRank): string {
  return rank.state ? String(rank.state) : 'unknown';
}

function stateRank(state: string): number {
  const i = STATE_ORDER.indexOf(state);
  return i < 0 ? STATE_ORDER.length : i;
}

export interface IStateGroup {
  state: string;
  ranks: number[];
  /** The median age of the group's "since", in seconds (null: no rank says since when). */
  age: number | null;
}

/** The ranks by state: the largest group first (ties: busy, idle, starting, dead, others). */
export function stateGroups(ranks: IRank[], nowMs: number): IStateGroup[] {
  const byState = new Map<string, { ranks: number[]; ages: number[] }>();
  for (const rank of ranks) {
    const state = stateOf(rank);
    let group = byState.get(state);
    if (!group) {
      group = { ranks: [], ages: [] };
      byState.set(state, group);
    }
    group.ranks.push(rank.rank);
    const age = ageSeconds(rank.since, nowMs);
    if (age !== null) {
      group.ages.push(age);
    }
  }
  return [...byState.entries()]
    .map(([state, g]) => ({ state, ranks: g.ranks, age: median(g.ages) }))
    .sort(
      (a, b) =>
        b.ranks.length - a.ranks.length ||
        stateRank(a.state) - stateRank(b.state) ||
        a.state.localeCompare(b.state)
    );
}

/**
 * "512 ranks: 510 busy 43 s, 2 idle (ranks 17,301)": the states counted, the largest group's
 * age, the others' ranks named. When the largest groups tie, each of them names its ranks.
 */
export function summaryLine(world: IWorld, nowMs: number): string {
  const ranks = world.ranks || [];
  if (ranks.length === 0) {
    return world.state === 'starting' ? 'starting, no rank yet' : 'no ranks';
  }
  const groups = stateGroups(ranks, nowMs);
  const ageText = (g: IStateGroup) => (g.age === null ? '' : ` ${formatAge(g.age)}`);
  if (ranks.length === 1) {
    return `1 rank: ${groups[0].state}${ageText(groups[0])}`;
  }
  const tied = groups.length > 1 && groups[1].ranks.length === groups[0].ranks.length;
  const parts = groups.map((g, i) => {
    const head = `${g.ranks.length} ${g.state}`;
    if (i === 0) {
      return head + ageText(g) + (tied ? ` (${rankList(g.ranks)})` : '');
    }
    return `${head} (${rankList(g.ranks)})`;
  });
  return `${ranks.length} ranks: ${parts.join(', ')}`;
}

// ---------------------------------------------------------------- stragglers

/** Busy this long after most ranks finished: a straggler. */
export const LATE_AFTER_S = 5;
/** Silent this long at least, and SILENT_FACTOR times the others' median: a straggler. */
export const SILENT_MIN_S = 20;
export const SILENT_FACTOR = 4;

export interface IStraggler {
  rank: number;
  reason: string;
}

/** Seconds since a busy rank last wrote output in this state (or since it became busy). */
export function silenceSeconds(rank: IRank, nowMs: number): number | null {
  const since = parseTime(rank.since);
  const output = parseTime(rank.last_output);
  const from = output !== null && (since === null || output >= since) ? output : since;
  return from === null ? null : Math.max(0, (nowMs - from) / 1000);
}

/** The ranks the running cell uses (all when no cell names them). */
function cellRanks(world: IWorld): IRank[] {
  const ranks = world.ranks || [];
  const wanted = world.cell?.ranks;
  if (!wanted || wanted.length === 0) {
    return ranks;
  }
  const set = new Set(wanted);
  return ranks.filter(r => set.has(r.rank));
}

/**
 * Ranks to look at: those still busy LATE_AFTER_S after most of the cell's ranks finished, or,
 * while most are busy, those silent much longer than the others (SILENT_FACTOR times the
 * median silence, and at least SILENT_MIN_S).
 */
export function stragglers(world: IWorld, nowMs: number): IStraggler[] {
  const ranks = cellRanks(world);
  const busy = ranks.filter(r => r.state === 'busy');
  const idle = ranks.filter(r => r.state === 'idle');
  if (busy.length === 0) {
    return [];
  }
  if (idle.length > busy.length) {
    const finished = median(
      idle.map(r => ageSeconds(r.since, nowMs)).filter((a): a is number => a !== null)
    );
    if (finished === null || finished < LATE_AFTER_S) {
      return [];
    }
    return busy.map(r => ({
      rank: r.rank,
      reason: `still busy ${formatAge(finished)} after most finished`
    }));
  }
  if (busy.length < 2 || busy.length <= idle.length) {
    return [];
  }
  const silences = busy.map(r => silenceSeconds(r, nowMs));
  const typical = median(silences.filter((s): s is number => s !== null));
  if (typical === null) {
    return [];
  }
  const limit = Math.max(SILENT_MIN_S, SILENT_FACTOR * typical);
  const found: IStraggler[] = [];
  busy.forEach((r, i) => {
    const s = silences[i];
    if (s !== null && s > limit) {
      found.push({
        rank: r.rank,
        reason: `silent ${formatAge(s)} while the others wrote ${formatAge(typical)} ago`
      });
    }
  });
  return found;
}

// ---------------------------------------------------------------- ranks by host

export interface IHostGroup {
  host: string;
  ranks: IRank[];
  /** "worker0: ranks 0-7 · 7 busy, 1 idle" */
  label: string;
}

function countsText(ranks: IRank[]): string {
  const counts = new Map<string, number>();
  for (const r of ranks) {
    counts.set(stateOf(r), (counts.get(stateOf(r)) || 0) + 1);
  }
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || stateRank(a[0]) - stateRank(b[0]))
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
}

/** The ranks by host, hosts in the order of their first rank, ranks in rank order. */
export function hostGroups(ranks: IRank[]): IHostGroup[] {
  const byHost = new Map<string, IRank[]>();
  for (const r of [...ranks].sort((a, b) => a.rank - b.rank)) {
    const host = r.host || '?';
    let list = byHost.get(host);
    if (!list) {
      list = [];
      byHost.set(host, list);
    }
    list.push(r);
  }
  return [...byHost.entries()].map(([host, list]) => ({
    host,
    ranks: list,
    label: `${host}: ${rankList(list.map(r => r.rank), 4)} · ${countsText(list)}`
  }));
}

export type RankRow =
  | { kind: 'host'; key: string; group: IHostGroup }
  | { kind: 'rank'; key: string; rank: IRank };

/** One row per host, followed by one per rank of that host: what the rank list scrolls. */
export function rankRows(ranks: IRank[]): RankRow[] {
  const rows: RankRow[] = [];
  for (const group of hostGroups(ranks)) {
    rows.push({ kind: 'host', key: `h:${group.host}`, group });
    for (const rank of group.ranks) {
      rows.push({ kind: 'rank', key: `r:${rank.rank}`, rank });
    }
  }
  return rows;
}

export interface IRankText {
  state: string;
  /** "43s": how long in this state (compact); "" when unknown. */
  since: string;
  /** "out 2s", "no output" (compact) */
  output: string;
  /** "rank 17 on w2: busy for 43 s, last output 2 s ago" */
  title: string;
}

export function rankText(rank: IRank, nowMs: number): IRankText {
  const since = ageSeconds(rank.since, nowMs);
  const output = ageSeconds(rank.last_output, nowMs);
  const state = stateOf(rank);
  return {
    state,
    since: since === null ? '' : shortAge(since),
    output: output === null ? 'no output' : `out ${shortAge(output)}`,
    title:
      `rank ${rank.rank} on ${rank.host}: ${state}` +
      (since === null ? '' : ` for ${formatAge(since)}`) +
      (output === null ? ', no output in this World' : `, last output ${formatAge(output)} ago`)
  };
}

// ---------------------------------------------------------------- the World

/** The key of a World in the panel: its id, or its kernel's pid on older servers. */
export function worldKey(world: IWorld): string {
  return world.id || String(world.pid);
}

/** "World worker0-4766-1 · 4 ranks · openmpi · running" */
export function worldTitle(world: IWorld): string {
  const parts = [`World ${world.id || 'of kernel ' + world.pid}`];
  const np = world.np ?? world.ranks?.length;
  if (np !== undefined) {
    parts.push(`${np} rank${np === 1 ? '' : 's'}`);
  }
  if (world.mpi) {
    parts.push(world.mpi);
  }
  if (world.state) {
    parts.push(world.state);
  }
  return parts.join(' · ');
}

export interface ICellLine {
  firstLine: string;
  /** "43 s" */
  elapsed: string;
  /** "ranks 0-3" when the cell runs on some ranks only, else "". */
  on: string;
}

/** The running cell: its first line and how long it has run; null when none runs. */
export function cellLine(world: IWorld, nowMs: number): ICellLine | null {
  const cell = world.cell;
  if (!cell) {
    return null;
  }
  const age = ageSeconds(cell.started, nowMs);
  const all = world.ranks?.length ?? 0;
  const some = cell.ranks && cell.ranks.length > 0 && cell.ranks.length < all;
  return {
    firstLine: cell.first_line || '(empty cell)',
    elapsed: age === null ? '' : formatAge(age),
    on: some ? rankList(cell.ranks) : ''
  };
}

/** `%mpirun --ranks 17,301 --where` for some ranks; `%mpirun --stacks` for none. */
export function snippetFor(ranks: number[]): string {
  return ranks.length > 0
    ? `%mpirun --ranks ${foldRanks(ranks)} --where`
    : '%mpirun --stacks';
}

/**
 * The ranks a snippet is for: those selected, else the stragglers, else the ranks outside the
 * largest state group (dead or idle ones among busy ones), else none.
 */
export function highlightedRanks(
  world: IWorld,
  selected: number[],
  found: IStraggler[],
  nowMs: number
): number[] {
  if (selected.length > 0) {
    return [...selected].sort((a, b) => a - b);
  }
  if (found.length > 0) {
    return found.map(s => s.rank).sort((a, b) => a - b);
  }
  const groups = stateGroups(world.ranks || [], nowMs);
  if (groups.length < 2 || groups[1].ranks.length === groups[0].ranks.length) {
    return [];
  }
  const rest: number[] = [];
  for (const g of groups.slice(1)) {
    rest.push(...g.ranks);
  }
  return rest.sort((a, b) => a - b);
}

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

/** The line under the Worlds heading when there is none. */
export const NO_WORLD_TEXT = 'No World running (start one with %%mpirun in a notebook).';
