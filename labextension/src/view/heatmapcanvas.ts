/**
 * The nodes x GPUs heatmap, drawn on one canvas (one fillRect a GPU): hover for a GPU's value,
 * click for a host's rows.
 */
import { cellAt, HEAT_METRICS, heatCellText, heatColor, IHeatmap } from '../model/heatmap';
import { el, setText, sizeCanvas } from './dom';

/** The nodes x GPUs heatmap, drawn on one canvas. */
export class Heatmap {
  constructor(private _onPick: (host: string) => void) {
    this.node = el('div', 'jp-MlpLive-heatmapBox');
    this.canvas = el('canvas', 'jp-MlpLive-heatmap');
    this._caption = el('div', 'jp-MlpLive-heatmapCaption');
    this.node.append(this.canvas, this._caption);
    this.canvas.addEventListener('mousemove', event => {
      const cell = this.cellAt(event);
      const text = cell && this._map ? heatCellText(this._map, cell.row, cell.col) : null;
      this.canvas.title = text || '';
    });
    this.canvas.addEventListener('click', event => {
      const cell = this.cellAt(event);
      if (cell && this._map) {
        this._onPick(this._map.hosts[cell.row]);
      }
    });
  }

  readonly node: HTMLElement;
  readonly canvas: HTMLCanvasElement;

  draw(map: IHeatmap, width: number): void {
    this._map = map;
    const rows = map.hosts.length;
    const cols = Math.max(1, map.columns);
    this._w = Math.max(4, Math.min(28, Math.floor(width / cols)));
    this._h = Math.max(3, Math.min(16, Math.floor(360 / Math.max(1, rows))));
    const context = sizeCanvas(this.canvas, this._w * cols, this._h * Math.max(1, rows));
    setText(
      this._caption,
      `${rows} host${rows === 1 ? '' : 's'} × ${map.columns} GPUs · ` +
        `${HEAT_METRICS.find(m => m[0] === map.metric)?.[1]}: light 0 %, dark 100 %` +
        (map.metric === 'temperature' ? ' (30-90 °C)' : '') +
        ' · red: XID/ECC errors · hover for values, click for a host'
    );
    if (!context) {
      return;
    }
    context.clearRect(0, 0, this._w * cols, this._h * rows);
    const gap = this._w > 6 && this._h > 6 ? 1 : 0;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < map.columns; c++) {
        const i = r * map.columns + c;
        context.fillStyle = heatColor(map.values[i]);
        context.fillRect(c * this._w, r * this._h, this._w - gap, this._h - gap);
      }
    }
    context.strokeStyle = '#d32f2f';
    context.lineWidth = 2;
    for (let i = 0; i < map.errors.length; i++) {
      if (map.errors[i]) {
        const r = Math.floor(i / map.columns);
        const c = i % map.columns;
        context.strokeRect(c * this._w + 1, r * this._h + 1, this._w - 2 - gap, this._h - 2 - gap);
      }
    }
  }

  private cellAt(event: MouseEvent): { row: number; col: number } | null {
    if (!this._map) {
      return null;
    }
    const box = this.canvas.getBoundingClientRect();
    return cellAt(this._map, event.clientX - box.left, event.clientY - box.top, this._w, this._h);
  }

  private _map: IHeatmap | null = null;
  private _w = 10;
  private _h = 10;
  private _caption: HTMLElement;
}
