/**
 * A World's ranks grouped by host, as virtualised rows: only the rows in view (and a few
 * around) exist in the DOM, and a row is written only when what it shows changed.
 */
import type { IRank } from '../model/documents';
import { RankRow, rankRows, rankText, stateHint } from '../model/ranks';
import { el, setAttr, setText } from './dom';

/** Every row is this tall (CSS: .jp-MlpLive-rank, .jp-MlpLive-hostrow). */
export const ROW_HEIGHT = 20;
/** The list shows at most this many rows; more scroll. */
export const MAX_VISIBLE_ROWS = 16;
/** Rows drawn beyond the visible ones on each side. */
const OVERSCAN = 6;

/** The rows to draw for a scroll position: [first, end). */
export function visibleRange(
  rowCount: number,
  scrollTop: number,
  viewHeight: number,
  rowHeight = ROW_HEIGHT,
  overscan = OVERSCAN
): [number, number] {
  const first = Math.min(rowCount, Math.max(0, Math.floor(scrollTop / rowHeight) - overscan));
  const end = Math.min(rowCount, Math.ceil((scrollTop + viewHeight) / rowHeight) + overscan);
  return [first, Math.max(first, end)];
}

interface IDrawn {
  node: HTMLElement;
  signature: string;
  index: number;
}

export interface IRankMarks {
  /** rank -> why it is a straggler */
  stragglers: Map<number, string>;
  selected: Set<number>;
}

export class RankList {
  constructor(private _onToggle: (rank: number) => void) {
    this.node = el('div', 'jp-MlpLive-ranks');
    this.node.setAttribute('role', 'list');
    this._spacer = el('div', 'jp-MlpLive-ranksSpacer');
    this.node.append(this._spacer);
    this.node.addEventListener('scroll', () => {
      this._scrollTop = this.node.scrollTop;
      this.draw();
    });
    this.node.addEventListener('click', event => {
      const row = (event.target as HTMLElement).closest('.jp-MlpLive-rank') as HTMLElement | null;
      if (row && row.dataset.rank !== undefined) {
        this._onToggle(Number(row.dataset.rank));
      }
    });
  }

  readonly node: HTMLElement;

  /** How many rank and host rows exist in the DOM now (tests, benchmarks). */
  get drawnCount(): number {
    return this._drawn.size;
  }

  /** New ranks, marks or time: recompute the rows when the ranks changed, then draw. */
  update(ranks: IRank[], marks: IRankMarks, nowMs: number): void {
    if (ranks !== this._ranks) {
      this._ranks = ranks;
      this._rows = rankRows(ranks);
      const height = this._rows.length * ROW_HEIGHT;
      this._spacer.style.height = `${height}px`;
      this._viewHeight = Math.min(this._rows.length, MAX_VISIBLE_ROWS) * ROW_HEIGHT;
      this.node.style.height = `${this._viewHeight}px`;
    }
    this._marks = marks;
    this._nowMs = nowMs;
    this.draw();
  }

  private draw(): void {
    const [first, end] = visibleRange(this._rows.length, this._scrollTop, this._viewHeight);
    const keep = new Set<string>();
    for (let i = first; i < end; i++) {
      const row = this._rows[i];
      keep.add(row.key);
      const signature = this.signature(row, i);
      let drawn = this._drawn.get(row.key);
      if (!drawn) {
        drawn = { node: this.create(row), signature: '', index: -1 };
        this._drawn.set(row.key, drawn);
        this.node.append(drawn.node);
      }
      if (drawn.signature !== signature) {
        this.fill(drawn.node, row);
        drawn.signature = signature;
      }
      if (drawn.index !== i) {
        drawn.node.style.top = `${i * ROW_HEIGHT}px`;
        drawn.index = i;
      }
    }
    for (const [key, drawn] of this._drawn) {
      if (!keep.has(key)) {
        drawn.node.remove();
        this._drawn.delete(key);
      }
    }
  }

  private signature(row: RankRow, index: number): string {
    if (row.kind === 'host') {
      return `h|${row.group.label}`;
    }
    const text = rankText(row.rank, this._nowMs);
    const r = row.rank.rank;
    return [
      text.state,
      text.since,
      text.output,
      this._marks.stragglers.get(r) || '',
      this._marks.selected.has(r) ? 's' : ''
    ].join('|');
  }

  private create(row: RankRow): HTMLElement {
    if (row.kind === 'host') {
      const node = el('div', 'jp-MlpLive-hostrow');
      node.dataset.host = row.group.host;
      return node;
    }
    const node = el('div', 'jp-MlpLive-rank');
    node.setAttribute('role', 'listitem');
    node.append(
      el('span', 'jp-MlpLive-rankNo'),
      el('span', 'jp-MlpLive-rankState'),
      el('span', 'jp-MlpLive-rankSince'),
      el('span', 'jp-MlpLive-rankOutput')
    );
    return node;
  }

  private fill(node: HTMLElement, row: RankRow): void {
    if (row.kind === 'host') {
      setText(node, row.group.label);
      node.title = row.group.label;
      return;
    }
    const rank = row.rank;
    const text = rankText(rank, this._nowMs);
    const straggler = this._marks.stragglers.get(rank.rank);
    const hint = stateHint(text.state);
    setAttr(node, 'data-rank', String(rank.rank));
    setAttr(node, 'data-state', text.state);
    node.classList.toggle('jp-mod-straggler', straggler !== undefined);
    node.classList.toggle('jp-mod-selected', this._marks.selected.has(rank.rank));
    const [no, state, since, output] = Array.from(node.children) as HTMLElement[];
    setText(no, String(rank.rank));
    setText(state, text.state);
    setText(since, text.since);
    setText(output, text.output);
    node.title =
      text.title +
      (rank.engine_id !== undefined && rank.engine_id !== null ? `, engine ${rank.engine_id}` : '') +
      (hint ? `\n${hint}` : '') +
      (straggler ? `\nstraggler: ${straggler}` : '') +
      '\nclick to select it (for Tail and the snippet)';
  }

  private _ranks: IRank[] | null = null;
  private _rows: RankRow[] = [];
  private _drawn = new Map<string, IDrawn>();
  private _marks: IRankMarks = { stragglers: new Map(), selected: new Set() };
  private _nowMs = 0;
  private _scrollTop = 0;
  private _viewHeight = 0;
  private _spacer: HTMLElement;
}
