/**
 * The nodes x GPUs heatmap: cells on one canvas (one fillRect a GPU, its marks over it), the
 * hosts' and GPUs' axes and the legend in the DOM around it, and a hover card. Drawn when new
 * samples come or the metric or the hosts change (GpuSection.update), never per animation frame.
 */
import type { GpuHistory } from '../model/gpuhistory';
import { axesCaption, heatLayout, IHeatLayout, labelStep, rowLabels, shortHostNames } from '../model/heataxes';
import { heatCard, heatCardText } from '../model/heatcard';
import { heatLegend } from '../model/heatlegend';
import { cellAt, heatColor, IHeatmap } from '../model/heatmap';
import { markShapes } from '../model/heatmarks';
import { el, setText, sizeCanvas } from './dom';
import { HeatCard } from './heatcard';
import { drawMark, HeatLegend } from './heatlegend';
import { sparkColors } from './sparklines';

interface ICell {
  row: number;
  col: number;
}

/** Places a node at (left, top), w x h px, in the heatmap's grid box. */
function put(node: HTMLElement, left: number, top: number, width: number, height: number): void {
  node.style.left = `${left}px`;
  node.style.top = `${top}px`;
  node.style.width = `${width}px`;
  node.style.height = `${height}px`;
}

/** The cells and their marks. */
function paintCells(context: CanvasRenderingContext2D, map: IHeatmap, layout: IHeatLayout): void {
  const { cellWidth: w, cellHeight: h } = layout;
  context.clearRect(0, 0, layout.gridWidth, layout.gridHeight);
  const gap = w > 6 && h > 6 ? 1 : 0;
  for (let r = 0; r < map.hosts.length; r++) {
    for (let c = 0; c < map.columns; c++) {
      context.fillStyle = heatColor(map.values[r * map.columns + c]);
      context.fillRect(c * w, r * h, w - gap, h - gap);
    }
  }
  for (let i = 0; i < map.marks.length; i++) {
    if (map.marks[i]) {
      const [x, y] = [(i % map.columns) * w, Math.floor(i / map.columns) * h];
      for (const shape of markShapes(map.marks[i])) {
        drawMark(context, shape, x, y, w - gap, h - gap);
      }
    }
  }
}

/** The nodes x GPUs heatmap, with its axes, legend and hover card. */
export class Heatmap {
  constructor(private _history: GpuHistory, private _onPick: (host: string) => void) {
    this.node = el('div', 'jp-MlpLive-heatmapBox');
    this.canvas = el('canvas', 'jp-MlpLive-heatmap');
    this._grid.append(this._corner, this._columns, this._rows, this.canvas, this._picked, this._cursor, this._card.node);
    this._body.append(this._grid, this._legend.node);
    this.node.append(this._caption, this._body);
    this._cursor.hidden = true;
    this._picked.hidden = true;
    this.canvas.addEventListener('mousemove', event => this.hover(this.cellAt(event), event));
    this.canvas.addEventListener('mouseleave', () => this.hover(null, null));
    this.canvas.addEventListener('click', event => {
      const cell = this.cellAt(event);
      if (cell && this._map) {
        this._onPick(this._map.hosts[cell.row]);
      }
    });
  }

  readonly node: HTMLElement;
  readonly canvas: HTMLCanvasElement;

  /** Draws `map` in `width` px; `picked`: the host whose rows are shown below (outlined). */
  draw(map: IHeatmap, width: number, nowS: number, picked: string | null): void {
    this._map = map;
    this._nowS = nowS;
    const names = shortHostNames(map.hosts);
    const layout = heatLayout(names.labels, map.columns, width);
    this._layout = layout;
    this._body.classList.toggle('jp-mod-legendBeside', layout.legendBeside);
    this.drawAxes(map.hosts, names.labels, map.columns, layout);
    setText(this._caption, axesCaption(names.prefix, layout.step, map.hosts.length));
    this._legend.update(heatLegend(map));
    const context = sizeCanvas(this.canvas, layout.gridWidth, layout.gridHeight);
    if (context) {
      paintCells(context, map, layout);
    }
    const row = picked === null ? -1 : map.hosts.indexOf(picked);
    this._picked.hidden = row < 0;
    if (row >= 0) {
      put(this._picked, layout.left - 1, layout.top + row * layout.cellHeight - 1, layout.gridWidth + 1, layout.cellHeight + 1);
    }
    if (this._hovered) {
      // The same host and GPU, wherever its row is now.
      const again = map.hosts.indexOf(this._hovered.host);
      this.hover(again < 0 ? null : { row: again, col: this._hovered.col }, null);
    }
  }

  /** The rows' and columns' labels, rebuilt only when the hosts or the geometry change. */
  private drawAxes(hosts: string[], labels: string[], columns: number, layout: IHeatLayout): void {
    const key = `${labels.join(',')}|${columns}|${JSON.stringify(layout)}`;
    if (key === this._axesKey) {
      return;
    }
    this._axesKey = key;
    const { left, top, cellWidth, cellHeight } = layout;
    this._grid.style.width = `${left + layout.gridWidth}px`;
    this._grid.style.height = `${top + layout.gridHeight}px`;
    put(this.canvas, left, top, layout.gridWidth, layout.gridHeight);
    put(this._corner, 0, 0, left, top);
    const rows = rowLabels(labels, layout.step).map(([row, text]) => {
      const label = el('div', 'jp-MlpLive-heatRowLabel', text);
      label.dataset.row = String(row);
      label.title = hosts[row];
      put(label, 0, top + row * cellHeight + cellHeight / 2 - 6, left - 4, 12);
      return label;
    });
    this._rows.replaceChildren(...rows);
    const every = labelStep(cellWidth, 14);
    const cols: HTMLElement[] = [];
    for (let c = 0; c < columns; c += every) {
      const label = el('div', 'jp-MlpLive-heatColLabel', String(c));
      put(label, left + c * cellWidth, 0, cellWidth, top);
      cols.push(label);
    }
    this._columns.replaceChildren(...cols);
  }

  /** Shows the card and the cursor for `cell` (null: hides them); `event` places the card. */
  private hover(cell: ICell | null, event: MouseEvent | null): void {
    const map = this._map;
    const card = cell && map ? heatCard(map, cell.row, cell.col) : null;
    if (!cell || !card || !map) {
      this._hovered = null;
      this._card.hide();
      this._cursor.hidden = true;
      this.canvas.title = '';
      return;
    }
    const same = this._hovered && this._hovered.host === card.host && this._hovered.col === cell.col;
    if (!same || event === null) {
      this._hovered = { host: card.host, col: cell.col };
      this._card.show(card, this._history.series.get(card.host), this._nowS, sparkColors(this.node));
      this.canvas.setAttribute('aria-description', heatCardText(card));
      const { left, top, cellWidth: w, cellHeight: h } = this._layout;
      put(this._cursor, left + cell.col * w - 1, top + cell.row * h - 1, w + 1, h + 1);
      this._cursor.hidden = false;
    }
    if (event) {
      const box = this._grid.getBoundingClientRect();
      this._card.place(event.clientX - box.left, event.clientY - box.top, box.width, box.height);
    }
  }

  private cellAt(event: MouseEvent): ICell | null {
    if (!this._map) {
      return null;
    }
    const box = this.canvas.getBoundingClientRect();
    const { cellWidth, cellHeight } = this._layout;
    return cellAt(this._map, event.clientX - box.left, event.clientY - box.top, cellWidth, cellHeight);
  }

  private _map: IHeatmap | null = null;
  private _layout: IHeatLayout = heatLayout([], 1, 100);
  private _axesKey = '';
  private _nowS = 0;
  private _hovered: { host: string; col: number } | null = null;
  private _caption = el('div', 'jp-MlpLive-heatmapCaption');
  private _body = el('div', 'jp-MlpLive-heatBody');
  private _grid = el('div', 'jp-MlpLive-heatGrid');
  private _corner = el('div', 'jp-MlpLive-heatCorner', 'GPU');
  private _columns = el('div', 'jp-MlpLive-heatCols');
  private _rows = el('div', 'jp-MlpLive-heatRows');
  private _picked = el('div', 'jp-MlpLive-heatPicked');
  private _cursor = el('div', 'jp-MlpLive-heatCursor');
  private _card = new HeatCard();
  private _legend = new HeatLegend();
}
