/**
 * A World's ranks as the panel lists them (pure: no DOM): by state, by host, one row each.
 * Times are compared with `nowMs`, the server's clock as the panel estimates it.
 */
import type { IRank, RankState } from './documents';
import { ageSeconds, formatAge, median, rankList, shortAge } from './format';

// ---------------------------------------------------------------- ranks by state

/** The order of states when counts tie, and in lists: every RankState (others come after). */
export const STATE_ORDER: readonly RankState[] = ['busy', 'paused', 'idle', 'starting', 'dead'];

export function stateOf(rank: IRank): string {
  return rank.state ? String(rank.state) : 'unknown';
}

function stateRank(state: string): number {
  const i = (STATE_ORDER as readonly string[]).indexOf(state);
  return i < 0 ? STATE_ORDER.length : i;
}

export interface IStateGroup {
  state: string;
  ranks: number[];
  /** The median age of the group's "since", in seconds (null: no rank says since when). */
  age: number | null;
}

/** The ranks by state: the largest group first (ties: busy, paused, idle, starting, dead, others). */
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

/** What a rank's row adds on hover for its state: a paused rank waits for the user, and how to move it on. */
export function stateHint(state: string): string {
  return state === 'paused'
    ? 'stopped at a breakpoint, waiting for you: `%mpirun --pdb c` continues it, `%mpirun --pdb q` ends the debugging'
    : '';
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

