/**
 * The rank grid of a large World (pure: no DOM): hosts as lines, local ranks as cells. Where
 * each cell lies for a width, which rank is under a point or in a rectangle, and the host
 * labels. The view (view/rankgrid.ts) places its cells and reads the mouse through this only.
 */
import type { IRank } from './documents';
import { hostGroups } from './ranks';

/** Worlds of more ranks than this show the grid; smaller ones keep the rows with text. */
export const GRID_ABOVE_RANKS = 16;
/** Each line of cells is this tall, its gap included: 64 hosts fit in 640 px. */
export const LINE_PITCH = 10;
/** The gap between cells, across and down. */
export const CELL_GAP = 1;
/** Cells are no narrower than this (more ranks on a host wrap to more lines)... */
export const MIN_CELL_WIDTH = 5;
/** ...and no wider than this (a wide tab keeps the grid compact). */
export const MAX_CELL_WIDTH = 28;
/** Host labels keep at most this many characters (the tooltip names the whole host). */
export const MAX_LABEL_CHARS = 7;
/** The width of a label character (9 px monospace) and the room after the label. */
const LABEL_CHAR_WIDTH = 6;
const LABEL_PAD = 4;

export function showsGrid(rankCount: number): boolean {
  return rankCount > GRID_ABOVE_RANKS;
}

export interface ICellBox {
  rank: number;
  host: string;
  /** The rank's place on its host: 0 for the host's lowest rank. */
  local: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface IGridHost {
  host: string;
  label: string;
  /** The host's ranks in rank order: cell i of the host shows ranks[i]. */
  ranks: number[];
  /** The host's first line of cells, and how many lines it takes. */
  firstLine: number;
  lines: number;
}

export interface IGridLayout {
  width: number;
  height: number;
  labelWidth: number;
  cellWidth: number;
  /** Cells per line: the most ranks of one host, or fewer when they do not fit the width. */
  columns: number;
  hosts: IGridHost[];
  cells: Map<number, ICellBox>;
  /** Line -> index in hosts. */
  lineHosts: number[];
}

const ALNUM = /[A-Za-z0-9]/;
const DIGIT = /[0-9]/;

/** Both characters of one kind (digits, or letters): cutting between them splits a word or a number. */
function sameRun(a: string, b: string): boolean {
  if (!ALNUM.test(a) || !ALNUM.test(b)) {
    return false;
  }
  return DIGIT.test(a) === DIGIT.test(b);
}

/** How many leading characters every host shares, backed off so no number or word is split. */
function commonPrefixLength(hosts: string[]): number {
  let n = Math.min(...hosts.map(h => h.length));
  for (const h of hosts) {
    let i = 0;
    while (i < n && h[i] === hosts[0][i]) {
      i++;
    }
    n = i;
  }
  while (n > 0 && hosts.some(h => n === h.length || sameRun(h[n - 1], h[n]))) {
    n--;
  }
  return n;
}

/** The domain every host shares (".cluster.local"), to leave off; "" when none. */
function commonDomain(hosts: string[]): string {
  const first = hosts[0];
  const dot = first.indexOf('.');
  if (dot <= 0 || /^[0-9.]+$/.test(first)) {
    return '';
  }
  const domain = first.slice(dot);
  return hosts.every(h => h.endsWith(domain) && h.length > domain.length) ? domain : '';
}

/**
 * Short labels that tell the hosts apart: "127.0.1.1".."127.0.1.64" -> "1".."64",
 * "gpu-a01.cluster.local" -> "a01"; at most MAX_LABEL_CHARS, keeping the end ("…" marks a cut).
 */
export function shortHostLabels(hosts: string[]): string[] {
  let names = hosts;
  if (hosts.length > 1) {
    const domain = commonDomain(hosts);
    names = hosts.map(h => h.slice(0, h.length - domain.length));
    const cut = commonPrefixLength(names);
    names = names.map(h => h.slice(cut));
  }
  return names.map(h => (h.length <= MAX_LABEL_CHARS ? h : '…' + h.slice(h.length - MAX_LABEL_CHARS + 1)));
}

/** How many cells a line holds, and how wide each is, for the room left of the labels. */
function columnsFor(room: number, widest: number): [number, number] {
  const fit = Math.max(1, Math.floor((room + CELL_GAP) / (MIN_CELL_WIDTH + CELL_GAP)));
  const columns = Math.max(1, Math.min(widest, fit));
  const cellWidth = Math.floor((room + CELL_GAP) / columns) - CELL_GAP;
  return [columns, Math.max(MIN_CELL_WIDTH, Math.min(MAX_CELL_WIDTH, cellWidth))];
}

/** Where every rank's cell lies for a grid `width` px wide (hosts in the order of their first rank). */
export function gridLayout(ranks: IRank[], width: number): IGridLayout {
  const groups = hostGroups(ranks);
  const labels = shortHostLabels(groups.map(g => g.host));
  const longest = Math.max(1, ...labels.map(l => l.length));
  const labelWidth = longest * LABEL_CHAR_WIDTH + LABEL_PAD;
  const widest = Math.max(1, ...groups.map(g => g.ranks.length));
  const [columns, cellWidth] = columnsFor(width - labelWidth, widest);
  const hosts: IGridHost[] = [];
  const cells = new Map<number, ICellBox>();
  const lineHosts: number[] = [];
  groups.forEach((group, h) => {
    const lines = Math.max(1, Math.ceil(group.ranks.length / columns));
    const firstLine = lineHosts.length;
    group.ranks.forEach((r, local) => {
      cells.set(r.rank, {
        rank: r.rank,
        host: group.host,
        local,
        x: labelWidth + (local % columns) * (cellWidth + CELL_GAP),
        y: (firstLine + Math.floor(local / columns)) * LINE_PITCH,
        width: cellWidth,
        height: LINE_PITCH - CELL_GAP
      });
    });
    hosts.push({ host: group.host, label: labels[h], ranks: group.ranks.map(r => r.rank), firstLine, lines });
    lineHosts.push(...Array<number>(lines).fill(h));
  });
  const used = labelWidth + columns * (cellWidth + CELL_GAP) - CELL_GAP;
  return { width: used, height: lineHosts.length * LINE_PITCH, labelWidth, cellWidth, columns, hosts, cells, lineHosts };
}

/** The rank whose cell (or the gap after it) is under (x, y), in the grid's px; null for none. */
export function rankAt(layout: IGridLayout, x: number, y: number): number | null {
  const line = Math.floor(y / LINE_PITCH);
  if (y < 0 || line >= layout.lineHosts.length || x < layout.labelWidth) {
    return null;
  }
  const column = Math.floor((x - layout.labelWidth) / (layout.cellWidth + CELL_GAP));
  if (column >= layout.columns) {
    return null;
  }
  const host = layout.hosts[layout.lineHosts[line]];
  const rank = host.ranks[(line - host.firstLine) * layout.columns + column];
  return rank === undefined ? null : rank;
}

/** The ranks whose cells a rectangle (corners in any order) touches, in rank order. */
export function ranksInRect(layout: IGridLayout, x0: number, y0: number, x1: number, y1: number): number[] {
  const [left, right] = x0 <= x1 ? [x0, x1] : [x1, x0];
  const [top, bottom] = y0 <= y1 ? [y0, y1] : [y1, y0];
  const found: number[] = [];
  for (const cell of layout.cells.values()) {
    if (cell.x <= right && cell.x + cell.width >= left && cell.y <= bottom && cell.y + cell.height >= top) {
      found.push(cell.rank);
    }
  }
  return found.sort((a, b) => a - b);
}

// ---------------------------------------------------------------- selecting cells

/** A click selects one rank; with shift, the ranks from the anchor to it; with ctrl/cmd, toggles it. */
export type ClickMode = 'one' | 'range' | 'toggle';

export interface IGridSelection {
  selected: Set<number>;
  /** Where the next shift-click's range starts: the last rank clicked without shift. */
  anchor: number | null;
}

/** The ranks from `a` to `b` (either order, both included) that the World has. */
export function rankRange(present: Iterable<number>, a: number, b: number): number[] {
  const [low, high] = a <= b ? [a, b] : [b, a];
  return [...present].filter(r => r >= low && r <= high).sort((x, y) => x - y);
}

/** The selection after a click on `rank`. */
export function clickSelection(
  current: IGridSelection,
  rank: number,
  mode: ClickMode,
  present: Iterable<number>
): IGridSelection {
  if (mode === 'toggle') {
    const selected = new Set(current.selected);
    if (!selected.delete(rank)) {
      selected.add(rank);
    }
    return { selected, anchor: rank };
  }
  if (mode === 'range' && current.anchor !== null) {
    return { selected: new Set(rankRange(present, current.anchor, rank)), anchor: current.anchor };
  }
  return { selected: new Set([rank]), anchor: rank };
}

/** The selection after dragging a rectangle over `ranks`: those, or with ctrl/cmd those added. */
export function dragSelection(current: IGridSelection, ranks: number[], add: boolean): IGridSelection {
  const selected = new Set(add ? [...current.selected, ...ranks] : ranks);
  return { selected, anchor: ranks.length > 0 ? ranks[0] : current.anchor };
}
