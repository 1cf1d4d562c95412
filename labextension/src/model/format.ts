/**
 * Rank ranges and times as the panel writes them, and what it says of an Interrupt's answer
 * (pure: no DOM).
 */

/** [0, 1, 2, 3, 5] -> ["0-3", "5"] */
export function rankRanges(ranks: number[]): string[] {
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  const parts: string[] = [];
  let start = 0;
  for (let i = 1; i <= sorted.length; i++) {
    if (i === sorted.length || sorted[i] !== sorted[i - 1] + 1) {
      const first = sorted[start];
      const last = sorted[i - 1];
      parts.push(first === last ? `${first}` : `${first}-${last}`);
      start = i;
    }
  }
  return parts;
}

/** [0, 1, 2, 3, 5] -> "0-3,5" */
export function foldRanks(ranks: number[]): string {
  return rankRanges(ranks).join(',');
}

function rangeSize(range: string): number {
  const [first, last] = range.split('-').map(Number);
  return last === undefined ? 1 : last - first + 1;
}

/**
 * "rank 3", "ranks 17,301", or with more than `max` ranges "ranks 1,3,5,7,9,11 +40" (40 more
 * ranks not listed).
 */
export function rankList(ranks: number[], max = 6): string {
  const ranges = rankRanges(ranks);
  const count = ranges.reduce((n, r) => n + rangeSize(r), 0);
  const word = count === 1 ? 'rank' : 'ranks';
  if (ranges.length <= max) {
    return `${word} ${ranges.join(',')}`;
  }
  const rest = ranges.slice(max).reduce((n, r) => n + rangeSize(r), 0);
  return `${word} ${ranges.slice(0, max).join(',')} +${rest}`;
}

/** "0-3,5" -> [0, 1, 2, 3, 5] (what foldRanks writes, and the server's folded rank sets). */
export function unfoldRanks(folded: string): number[] {
  const ranks: number[] = [];
  for (const part of folded.split(',')) {
    const [first, last] = part.trim().split('-').map(Number);
    if (part.trim() === '' || !Number.isInteger(first)) {
      continue;
    }
    const end = Number.isInteger(last) ? last : first;
    for (let r = first; r <= end; r++) {
      ranks.push(r);
    }
  }
  return ranks;
}

/**
 * What the Interrupt button says of POST .../interrupt's answer. The server names the signalled
 * ranks folded ("0-3,5"; "" for none); a list of ranks is taken too. Hosts it could not reach
 * ("problems": {host: why}) are named after.
 */
export function interruptText(answer: unknown): string {
  return signalText(answer, 'Interrupt', 'No rank was running anything to interrupt.');
}

/**
 * What the Unblock button says of POST .../unblock's answer (the same shape as Interrupt's): the
 * busy ranks whose hung collectives now end, and what happens next. "progressed" names the idle
 * ranks sent MPI's progress (a revoked MPI call across hosts may wait on one of them).
 */
export function unblockText(answer: unknown): string {
  const text = signalText(
    answer,
    'Unblock',
    'No rank was busy: nothing to unblock.',
    ' Their hung collectives fail, every process keeps its state; the next %%mpirun cell makes the ' +
      'default process group, or the MPI communicator, again.'
  );
  const progressed = ((answer || {}) as { progressed?: unknown }).progressed;
  const driven = typeof progressed === 'string' ? unfoldRanks(progressed) : [];
  return driven.length
    ? `${text} Some were still busy a second later: the progress signal went to the idle ` +
        `${rankList(driven)}, for a revoked MPI call to end.`
    : text;
}

function signalText(answer: unknown, action: string, none: string, after = ''): string {
  const said = (answer || {}) as { signalled?: unknown; problems?: unknown; message?: unknown };
  const problems = Object.entries((said.problems as Record<string, unknown>) || {});
  const unreached = problems.length
    ? ` Not reached: ${problems.map(([host, why]) => `${host} (${String(why)})`).join(', ')}.`
    : '';
  let ranks: number[] | null = null;
  if (Array.isArray(said.signalled)) {
    ranks = said.signalled.map(Number).filter(Number.isInteger);
  } else if (typeof said.signalled === 'string') {
    ranks = unfoldRanks(said.signalled);
  }
  if (ranks === null) {
    return (typeof said.message === 'string' && said.message ? said.message : `${action} sent.`) + unreached;
  }
  const done = ranks.length ? `${action} sent to ${rankList(ranks)}.${after}` : none;
  return done + unreached;
}

/** Epoch ms of an ISO 8601 time, or null. */
export function parseTime(iso: string | null | undefined): number | null {
  if (!iso) {
    return null;
  }
  const ms = Date.parse(iso);
  return isNaN(ms) ? null : ms;
}

/** Seconds from `iso` to `nowMs` (never negative), or null when `iso` is not a time. */
export function ageSeconds(iso: string | null | undefined, nowMs: number): number | null {
  const ms = parseTime(iso);
  return ms === null ? null : Math.max(0, (nowMs - ms) / 1000);
}

/** 7 -> "7 s", 95 -> "1 min 35 s", 120 -> "2 min", 1500 -> "25 min", 7300 -> "2 h 01 min", 3 days -> "3 d". */
export function formatAge(seconds: number): string {
  const s = Math.floor(Math.max(0, seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (s < 600 && s % 60 !== 0) {
    return `${minutes} min ${s % 60} s`;
  }
  if (s < 3600) {
    return `${minutes} min`;
  }
  const hours = Math.floor(s / 3600);
  if (hours < 48) {
    return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
  }
  return `${Math.floor(hours / 24)} d`;
}

/** The compact form for rows: 7 -> "7s", 95 -> "1m35", 1500 -> "25m", 7300 -> "2h01", 3 days -> "3d". */
export function shortAge(seconds: number): string {
  const s = Math.floor(Math.max(0, seconds));
  if (s < 60) {
    return `${s}s`;
  }
  const minutes = Math.floor(s / 60);
  if (s < 600) {
    return `${minutes}m${String(s % 60).padStart(2, '0')}`;
  }
  if (s < 3600) {
    return `${minutes}m`;
  }
  const hours = Math.floor(s / 3600);
  if (hours < 48) {
    return `${hours}h${String(minutes % 60).padStart(2, '0')}`;
  }
  return `${Math.floor(hours / 24)}d`;
}

export function median(values: number[]): number | null {
  if (values.length === 0) {
    return null;
  }
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
