/**
 * A large World's ranks as a grid: one line of small cells per host, each cell coloured by its
 * rank's state (CSS: [data-state]), stragglers outlined, the selection ringed. The cells are
 * divs placed once per layout (model/grid.ts); an update writes only the cells whose state or
 * marks changed, so 512 ranks flipping 4 times a second cost a few attribute writes, not a
 * redraw. The mouse is read through the same layout (hover, click, shift-click, drag).
 * The cells are first placed once the grid's width is measured, in the frame after: placing
 * them at a guessed width and again at the real one made opening the panel on 512 ranks one
 * task of 40-56 ms (two builds, two style and layout passes), near the 50 ms of a long task.
 */
import type { IRank } from '../model/documents';
import {
  ClickMode,
  clickSelection,
  dragSelection,
  gridLayout,
  IGridLayout,
  IGridSelection,
  LINE_PITCH,
  rankAt,
  ranksInRect
} from '../model/grid';
import { cellTooltip, legendCounts } from '../model/gridtext';
import { stateOf } from '../model/ranks';
import { el, setAttr, setText } from './dom';
import type { IRankMarks } from './ranklist';

/** The width to lay out for where nothing measures the grid (no ResizeObserver): a sidebar's. */
const FIRST_WIDTH = 240;
/** A press that moves farther than this (px) drags a rectangle instead of clicking. */
const DRAG_PX = 4;

interface ICellNode {
  node: HTMLElement;
  /** What the node shows now: "state|s|x" (straggler, selected), to write only changes. */
  shown: string;
}

interface IPress {
  x: number;
  y: number;
  dragging: boolean;
}

/** Reads a rank's last output line (its log's tail), or '' (no such route, no output). */
export type LastLineReader = (rank: number) => Promise<string>;

export class RankGrid {
  /**
   * `onSelect` gets the new selection after a click, a drag, Escape or a click on empty space;
   * `readLastLine` is asked for a hovered rank's last line, once per output it wrote.
   */
  constructor(
    private _onSelect: (selected: Set<number>) => void,
    private _readLastLine: LastLineReader | null = null
  ) {
    this.node = el('div', 'jp-MlpLive-grid');
    this.node.tabIndex = 0;
    this.node.setAttribute('aria-label', "the World's ranks by host: click, shift-click, ctrl-click or drag to select");
    this._legend = el('div', 'jp-MlpLive-gridLegend');
    this._area = el('div', 'jp-MlpLive-gridArea');
    this._tip = el('div', 'jp-MlpLive-gridTip');
    this._tip.hidden = true;
    this._band = el('div', 'jp-MlpLive-gridBand');
    this._band.hidden = true;
    this.node.append(this._legend, this._area);
    this._area.append(this._tip, this._band);
    this.listen();
    if (typeof ResizeObserver !== 'undefined') {
      new ResizeObserver(() => this.resized()).observe(this.node);
    } else {
      this._width = FIRST_WIDTH; // nothing will measure it: lay out for a sidebar's
    }
  }

  readonly node: HTMLElement;

  /** New ranks, marks or time: lay out again if the hosts or width changed, then write the changed cells. */
  update(ranks: IRank[], marks: IRankMarks, nowMs: number): void {
    this._ranks = ranks;
    this._marks = marks;
    this._nowMs = nowMs;
    if (marks.selected.size === 0) {
      this._anchor = null;
    }
    const shape = ranks.map(r => `${r.rank}@${r.host}`).join(' ');
    if (shape !== this._shape) {
      this._shape = shape;
      // As wide as its widest host's cells at their widest: no wider beside the World's text.
      this.node.style.flexBasis = `${gridLayout(ranks, Infinity).width}px`;
      if (this._width > 0) {
        this.build();
      }
    }
    this.paint();
  }

  private resized(): void {
    const width = this.node.clientWidth;
    if (width <= 0 || width === this._width) {
      return;
    }
    const first = this._width === 0;
    this._width = width;
    if (!first) {
      this.build();
      this.paint();
    } else if (!this._firstFrame) {
      // Not in this frame, which is laying out the panel itself: its own task in the next one.
      this._firstFrame = true;
      requestAnimationFrame(() => {
        this.build();
        this.paint();
      });
    }
  }

  /** Places a label per host and a cell per rank, for the ranks and width now. */
  private build(): void {
    const layout = gridLayout(this._ranks, this._width);
    this._layout = layout;
    this._cells.clear();
    const nodes: HTMLElement[] = [];
    for (const host of layout.hosts) {
      const label = el('div', 'jp-MlpLive-gridHost', host.label);
      label.title = `${host.host}: ${host.ranks.length} rank${host.ranks.length === 1 ? '' : 's'}`;
      place(label, 0, host.firstLine * LINE_PITCH, layout.labelWidth - 2, LINE_PITCH - 1);
      nodes.push(label);
    }
    for (const cell of layout.cells.values()) {
      const node = el('div', 'jp-MlpLive-gridCell');
      node.dataset.rank = String(cell.rank);
      place(node, cell.x, cell.y, cell.width, cell.height);
      this._cells.set(cell.rank, { node, shown: '' });
      nodes.push(node);
    }
    this._area.replaceChildren(...nodes, this._tip, this._band);
    this._area.style.height = `${layout.height}px`;
    this._area.style.width = `${layout.width}px`;
  }

  /** Writes each cell whose state, outline or ring changed; the legend; the open tooltip. */
  private paint(): void {
    const { stragglers, selected } = this._marks;
    for (const rank of this._ranks) {
      const cell = this._cells.get(rank.rank);
      if (!cell) {
        continue;
      }
      const state = stateOf(rank);
      const straggler = stragglers.has(rank.rank);
      const chosen = selected.has(rank.rank);
      const shown = `${state}|${straggler ? 's' : ''}|${chosen ? 'x' : ''}`;
      if (shown !== cell.shown) {
        cell.shown = shown;
        cell.node.dataset.state = state;
        cell.node.classList.toggle('jp-mod-straggler', straggler);
        cell.node.classList.toggle('jp-mod-selected', chosen);
      }
    }
    this.paintLegend();
    if (this._hovered !== null) {
      this.showTip(this._hovered);
    }
  }

  private paintLegend(): void {
    const entries = legendCounts(this._ranks);
    const key = entries.map(e => e.state).join(' ');
    if (key !== this._legendKey) {
      this._legendKey = key;
      this._legend.replaceChildren(
        ...entries.map(e => {
          const item = el('span', 'jp-MlpLive-gridKey');
          item.dataset.state = e.state;
          item.append(el('span', 'jp-MlpLive-gridSwatch'), el('span', 'jp-MlpLive-gridCount'));
          return item;
        })
      );
    }
    entries.forEach((e, i) => {
      const item = this._legend.children[i] as HTMLElement;
      setText(item.lastChild as HTMLElement, `${e.state} ${e.count}`);
      setAttr(item, 'data-count', String(e.count));
    });
  }

  private listen(): void {
    this._area.addEventListener('pointerdown', event => this.press(event));
    this._area.addEventListener('pointermove', event => this.move(event));
    this._area.addEventListener('pointerup', event => this.release(event));
    this._area.addEventListener('pointerleave', () => this.hideTip());
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        this.select({ selected: new Set(), anchor: null });
      }
    });
  }

  /** The pointer in the grid's px (the cells' coordinates). */
  private point(event: PointerEvent): [number, number] {
    const box = this._area.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  }

  private press(event: PointerEvent): void {
    if (event.button !== 0) {
      return;
    }
    const [x, y] = this.point(event);
    this._press = { x, y, dragging: false };
    this._area.setPointerCapture?.(event.pointerId);
    event.preventDefault(); // no text selection on shift-click; focus stays for Escape
    this.node.focus({ preventScroll: true });
  }

  private move(event: PointerEvent): void {
    const [x, y] = this.point(event);
    const press = this._press;
    if (press) {
      press.dragging = press.dragging || Math.hypot(x - press.x, y - press.y) > DRAG_PX;
      if (press.dragging) {
        this.hideTip();
        place(this._band, Math.min(x, press.x), Math.min(y, press.y), Math.abs(x - press.x), Math.abs(y - press.y));
        this._band.hidden = false;
      }
      return;
    }
    const rank = this._layout ? rankAt(this._layout, x, y) : null;
    if (rank === null) {
      this.hideTip();
    } else if (rank !== this._hovered) {
      this.showTip(rank);
    }
  }

  private release(event: PointerEvent): void {
    const press = this._press;
    this._press = null;
    this._band.hidden = true;
    if (!press || !this._layout) {
      return;
    }
    const [x, y] = this.point(event);
    const current: IGridSelection = { selected: this._marks.selected, anchor: this._anchor };
    const toggle = event.ctrlKey || event.metaKey;
    if (press.dragging) {
      this.select(dragSelection(current, ranksInRect(this._layout, press.x, press.y, x, y), toggle));
      return;
    }
    const rank = rankAt(this._layout, press.x, press.y);
    const mode: ClickMode = event.shiftKey ? 'range' : toggle ? 'toggle' : 'one';
    this.select(
      rank === null
        ? { selected: new Set(), anchor: null }
        : clickSelection(current, rank, mode, this._ranks.map(r => r.rank))
    );
  }

  private select(selection: IGridSelection): void {
    this._anchor = selection.anchor;
    // The World redraws on the next frame; a click before then builds on this selection.
    this._marks = { ...this._marks, selected: selection.selected };
    this._onSelect(selection.selected);
  }

  private showTip(rank: number): void {
    const cell = this._layout?.cells.get(rank);
    const doc = this._ranks.find(r => r.rank === rank);
    if (!cell || !doc) {
      this.hideTip();
      return;
    }
    this._hovered = rank;
    const known = this._lastLines.get(rank);
    const fresh = known !== undefined && known.at === doc.last_output;
    setText(this._tip, cellTooltip(doc, cell.local, this._nowMs, this._marks.stragglers.get(rank),
      fresh ? known.line : undefined));
    if (!fresh && doc.last_output) {
      this.readLastLine(rank, doc.last_output);
    }
    setAttr(this._tip, 'data-rank', String(rank));
    // As wide as the grid (CSS); below the cell, or above it in the lower half of a tall grid.
    const height = this._layout?.height ?? 0;
    const below = cell.y < height / 2 || cell.y < 80;
    this._tip.style.top = below ? `${cell.y + LINE_PITCH + 2}px` : '';
    this._tip.style.bottom = below ? '' : `${height - cell.y + 2}px`;
    this._tip.hidden = false;
  }

  /** The hovered rank's last line, read once per output time; shown if it is still hovered. */
  private readLastLine(rank: number, at: string): void {
    if (this._readLastLine === null || this._reading.has(rank)) {
      return;
    }
    this._reading.add(rank);
    this._readLastLine(rank)
      .then(line => this._lastLines.set(rank, { at, line }))
      .catch(() => this._lastLines.set(rank, { at, line: '' }))
      .finally(() => {
        this._reading.delete(rank);
        if (this._hovered === rank) {
          this.showTip(rank);
        }
      });
  }

  private hideTip(): void {
    this._hovered = null;
    this._tip.hidden = true;
  }

  private _ranks: IRank[] = [];
  private _marks: IRankMarks = { stragglers: new Map(), selected: new Set() };
  private _nowMs = 0;
  /** The grid's measured width (px); 0 until measured, and nothing is placed until then. */
  private _width = 0;
  private _firstFrame = false;
  private _shape = '';
  private _layout: IGridLayout | null = null;
  private _cells = new Map<number, ICellNode>();
  private _legendKey = '';
  private _anchor: number | null = null;
  private _hovered: number | null = null;
  private _lastLines = new Map<number, { at: string; line: string }>();
  private _reading = new Set<number>();
  private _press: IPress | null = null;
  private _legend: HTMLElement;
  private _area: HTMLElement;
  private _tip: HTMLElement;
  private _band: HTMLElement;
}

/** Puts an absolutely placed node at (x, y), w x h px. */
function place(node: HTMLElement, x: number, y: number, width: number, height: number): void {
  node.style.left = `${x}px`;
  node.style.top = `${y}px`;
  node.style.width = `${width}px`;
  node.style.height = `${height}px`;
}
