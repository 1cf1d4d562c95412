/**
 * The heatmap's axes and geometry (pure: no DOM): short host names for the rows, which rows get a
 * label when not all fit, the cells' size for the width there is, and the columns' labels.
 */

/** The rows' labels: each host's name less the prefix all share (said once, in the caption). */
export interface IHostLabels {
  /** "127.0.1." or "worker" ("" when none is shared, or a single host). */
  prefix: string;
  labels: string[];
}

/** A shared prefix is cut only where a name's next part starts: after . - _ or before a digit. */
function cutAt(name: string, end: number): boolean {
  return /[.\-_]/.test(name[end - 1]) || (/\D/.test(name[end - 1]) && /\d/.test(name[end]));
}

/** Short row labels: the first label of a DNS name (not of an IP), less the common prefix. */
export function shortHostNames(hosts: string[]): IHostLabels {
  const short = hosts.map(h => (/^[\d.]+$/.test(h) || /:/.test(h) ? h : h.split('.')[0]));
  if (short.length < 2) {
    return { prefix: '', labels: short };
  }
  let end = 0;
  const shortest = Math.min(...short.map(s => s.length));
  while (end < shortest - 1 && short.every(s => s[end] === short[0][end])) {
    end++;
  }
  while (end > 0 && !short.every(s => cutAt(s, end))) {
    end--;
  }
  return { prefix: short[0].slice(0, end), labels: short.map(s => s.slice(end)) };
}

/** Steps a row label may take: every row, every 2nd, 4th, 5th... */
const STEPS = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 250, 500, 1000];

/** Every how many rows a label goes, for rows `rowPx` high and a label `labelPx` high. */
export function labelStep(rowPx: number, labelPx = 11): number {
  return STEPS.find(step => step * rowPx >= labelPx) ?? STEPS[STEPS.length - 1];
}

export interface IHeatLayout {
  /** Width of the rows' labels and height of the columns' labels (the grid's origin), px. */
  left: number;
  top: number;
  cellWidth: number;
  cellHeight: number;
  /** Every how many rows a label goes (1: all). */
  step: number;
  /** The grid alone, px. */
  gridWidth: number;
  gridHeight: number;
  /** Whether the legend goes at the right of the grid (a wide panel) rather than below it. */
  legendBeside: boolean;
}

/** The grid's height at most (64 hosts: 10 px a row), and its cells' bounds, px. */
export const MAX_GRID_HEIGHT = 640;
const ROW_PX: [number, number] = [4, 18];
const COLUMN_PX: [number, number] = [8, 36];
const LABEL_CHAR_PX = 6;
const COLUMN_LABELS_PX = 13;
/** The legend's width beside the grid (with its gap), and the cells' least width then, px. */
export const LEGEND_BESIDE_PX = 170;
const CELL_BESIDE_LEGEND_PX = 22;

/**
 * The geometry of a rows x columns heatmap in `width` px, labelled by `labels`: the legend at
 * the right where the cells keep 22 px beside it (a wide panel, so the whole fits 900 px high),
 * below them otherwise (the sidebar).
 */
export function heatLayout(labels: string[], columns: number, width: number): IHeatLayout {
  const rows = labels.length;
  const longest = labels.reduce((n, label) => Math.max(n, label.length), 1);
  const left = Math.min(96, Math.max(18, longest * LABEL_CHAR_PX + 6));
  const cols = Math.max(1, columns);
  const legendBeside = width - left - LEGEND_BESIDE_PX >= cols * CELL_BESIDE_LEGEND_PX;
  const room = width - left - (legendBeside ? LEGEND_BESIDE_PX : 0);
  const cellWidth = clamp(Math.floor(room / cols), COLUMN_PX);
  const cellHeight = clamp(Math.floor(MAX_GRID_HEIGHT / Math.max(1, rows)), ROW_PX);
  return {
    left,
    top: COLUMN_LABELS_PX,
    cellWidth,
    cellHeight,
    step: labelStep(cellHeight),
    gridWidth: cellWidth * cols,
    gridHeight: cellHeight * Math.max(1, rows),
    legendBeside
  };
}

function clamp(v: number, [low, high]: [number, number]): number {
  return Math.min(high, Math.max(low, v));
}

/** The rows that get a label: [row, text] every `step` rows from the first. */
export function rowLabels(labels: string[], step: number): [number, string][] {
  const out: [number, string][] = [];
  for (let row = 0; row < labels.length; row += Math.max(1, step)) {
    out.push([row, labels[row]]);
  }
  return out;
}

/** "rows: 64 hosts 127.0.1.* (every 2nd labelled; hover names each)", the axes' caption. */
export function axesCaption(prefix: string, step: number, rows: number): string {
  const hosts = `${rows} host${rows === 1 ? '' : 's'}${prefix ? ` ${prefix}*` : ''}`;
  const every = step > 1 ? ` (every ${ordinal(step)} labelled; hover names each)` : '';
  return `rows: ${hosts}${every} · columns: GPU index`;
}

function ordinal(n: number): string {
  const teens = n % 100 >= 11 && n % 100 <= 13;
  return `${n}${teens ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th')}`;
}
