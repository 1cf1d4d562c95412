/**
 * What the rank grid says in words (pure: no DOM): a cell's tooltip, the legend's counts and
 * the one line that stands for the stragglers (the grid outlines them).
 */
import type { IRank } from './documents';
import { ageSeconds, formatAge, rankList } from './format';
import { STATE_ORDER, stateHint, stateOf } from './ranks';

/** How to select in the grid: the last line of every cell's tooltip. */
export const SELECT_HINT = 'select: click, shift-click (range), ctrl-click (toggle), drag';

/** A tooltip's last output line is cut to this many characters. */
export const LAST_LINE_CHARS = 100;

/**
 * The last line a rank wrote, from the tail of its log (the Tail route): its last non-blank
 * line, cut to LAST_LINE_CHARS; '' when it wrote nothing.
 */
export function lastLineOf(tail: string): string {
  const lines = tail.split(/\r?\n|\r/).map(line => line.replace(/\s+$/, '')).filter(line => line.trim() !== '');
  const last = lines.length ? lines[lines.length - 1] : '';
  return last.length > LAST_LINE_CHARS ? last.slice(0, LAST_LINE_CHARS - 1) + '…' : last;
}

/**
 * "rank 17 on 127.0.1.3 (local rank 1)", its state and for how long, when it last wrote output
 * and the line (`lastLine`, read from its log when the cell is hovered: the documents carry
 * only when a rank last wrote), why it is a straggler.
 */
export function cellTooltip(
  rank: IRank,
  local: number,
  nowMs: number,
  straggler?: string,
  lastLine?: string
): string {
  const state = stateOf(rank);
  const since = ageSeconds(rank.since, nowMs);
  const output = ageSeconds(rank.last_output, nowMs);
  const lines = [
    `rank ${rank.rank} on ${rank.host} (local rank ${local})`,
    since === null ? state : `${state} for ${formatAge(since)}`,
    output === null ? 'no output in this World' : `last output ${formatAge(output)} ago`
  ];
  if (output !== null && lastLine) {
    lines.push(`  ${lastLine}`);
  }
  if (straggler) {
    lines.push(`straggler: ${straggler}`);
  }
  const hint = stateHint(state);
  if (hint) {
    lines.push(hint);
  }
  lines.push(SELECT_HINT);
  return lines.join('\n');
}

export interface ILegendEntry {
  state: string;
  count: number;
}

/** Every known state in the list's order with its count (0 too: the colours stay learnt), then any other. */
export function legendCounts(ranks: IRank[]): ILegendEntry[] {
  const counts = new Map<string, number>(STATE_ORDER.map(s => [s, 0]));
  for (const rank of ranks) {
    const state = stateOf(rank);
    counts.set(state, (counts.get(state) || 0) + 1);
  }
  return [...counts.entries()].map(([state, count]) => ({ state, count }));
}

/** "3 stragglers outlined: ranks 2,5,9" (the grid outlines them, each cell's tooltip says why); "" for none. */
export function stragglerLine(ranks: number[]): string {
  if (ranks.length === 0) {
    return '';
  }
  const word = ranks.length === 1 ? 'straggler' : 'stragglers';
  return `${ranks.length} ${word} outlined: ${rankList(ranks, 4)}`;
}
