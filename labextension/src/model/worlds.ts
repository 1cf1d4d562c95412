/**
 * What the panel says of a World (pure: no DOM): its title, the summary line of its ranks'
 * states, the running cell, the stragglers and the snippet's ranks. Times are compared with
 * `nowMs`, the server's clock as the panel estimates it.
 */
import type { IRank, IWorld } from './documents';
import { ageSeconds, foldRanks, formatAge, median, parseTime, rankList, rankRanges, shortAge } from './format';
import { IStateGroup, stateGroups } from './ranks';

// ---------------------------------------------------------------- the summary line

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

/** The grid's line names a group's ranks only when they fold into this many ranges at most. */
const NAMED_RANGES = 4;
/** The running cell's first line is cut after this many characters in the grid's line. */
const CELL_CHARS = 28;

function groupText(g: IStateGroup, first: boolean): string {
  const head = `${g.ranks.length} ${g.state}`;
  if (first) {
    return g.age === null ? head : `${head} ${shortAge(g.age)}`;
  }
  const ranges = rankRanges(g.ranks);
  return ranges.length <= NAMED_RANGES ? `${head} (${ranges.join(', ')})` : head;
}

/** `cell "for step in range…" 4m13 on 0-3`: the running cell, or "" when none runs. */
function cellText(world: IWorld, nowMs: number): string {
  const cell = world.cell;
  if (!cell) {
    return '';
  }
  const line = cell.first_line || '(empty cell)';
  const cut = line.length > CELL_CHARS ? `${line.slice(0, CELL_CHARS - 1)}…` : line;
  const age = ageSeconds(cell.started, nowMs);
  const on = cellLine(world, nowMs)?.on;
  return `cell "${cut}"${age === null ? '' : ` ${shortAge(age)}`}${on ? ` on ${on}` : ''}`;
}

/**
 * The one line of a World shown as a grid: `512 ranks: 510 busy 4m12 · 2 idle (17, 301) ·
 * cell "for step in range…" 4m13`. The largest group first with its age; the others named
 * when few (the grid shows where the rest are); the running cell last.
 */
export function gridSummaryLine(world: IWorld, nowMs: number): string {
  const ranks = world.ranks || [];
  if (ranks.length < 2) {
    return summaryLine(world, nowMs);
  }
  const parts = stateGroups(ranks, nowMs).map((g, i) => groupText(g, i === 0));
  const cell = cellText(world, nowMs);
  return `${ranks.length} ranks: ${parts.join(' · ')}${cell ? ` · ${cell}` : ''}`;
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
 * median silence, and at least SILENT_MIN_S). A paused rank (stopped at a breakpoint) waits for
 * the user: it is never a straggler, and it is not one that finished either.
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

/** "stragglers: rank 2 still busy 8 s after most finished; …": the list's paragraph, for small Worlds. */
export function stragglerText(found: IStraggler[]): string {
  if (found.length === 0) {
    return '';
  }
  const named = found.slice(0, 3).map(s => `rank ${s.rank} ${s.reason}`).join('; ');
  return `stragglers: ${named}` + (found.length > 3 ? `; ${rankList(found.slice(3).map(s => s.rank))} too` : '');
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
  if (world.kept) {
    parts.push(orphaned(world) ? `kept, no kernel (stops ${keptFor(world)} after it left)` : 'kept');
  }
  return parts.join(' · ');
}

/** A kept World whose kernel is gone: `%mpirun --attach` takes it up; the panel can only stop it. */
export function orphaned(world: IWorld): boolean {
  return world.kernel === 'gone';
}

function keptFor(world: IWorld): string {
  const hours = world.keep_hours ?? 8;
  return hours >= 1 ? `${hours} h` : `${Math.round(hours * 60)} min`;
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

/** The last profile: a title (when, and the straggler) and its report; null before the first. */
export function lastProfile(world: IWorld, nowMs: number): { title: string; text: string } | null {
  const profile = world.profile;
  if (!profile) {
    return null;
  }
  const age = ageSeconds(profile.at, nowMs);
  const when = age === null ? '' : ` (${formatAge(age)} ago)`;
  const who = profile.straggler === null ? 'no straggler named' : `straggler: rank ${profile.straggler}`;
  return {
    title: `last profile${when}: ${who}`,
    text: [...profile.lines, `the samples: ${profile.folder}`].join('\n')
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

/** The line under the Worlds heading when there is none. */
export const NO_WORLD_TEXT = 'No World running (start one with %%mpirun in a notebook).';
