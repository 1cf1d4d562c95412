/**
 * The heatmap's marks drawn on a cell (one shape a kind: heatmarks.ts), and its legend: the
 * metric's gradient with its range and unit, the colour of "no value", and what each mark means.
 */
import { IHeatLegend, legendText } from '../model/heatlegend';
import { MARK_KINDS, MarkShape } from '../model/heatmarks';
import { el, setAttr, setText, sizeCanvas } from './dom';

const MARK_COLORS: { [shape in MarkShape]: string } = {
  triangle: '#ff9800',
  dot: '#e53935',
  cross: '#d50000'
};
const HALO = 'rgba(255,255,255,0.9)';

/** One mark on the cell at (x, y), w x h px: a corner triangle, a dot at the left, a cross in the middle. */
export function drawMark(context: CanvasRenderingContext2D, shape: MarkShape, x: number, y: number, w: number, h: number): void {
  const size = Math.max(3, Math.min(w, h));
  context.fillStyle = MARK_COLORS[shape];
  context.strokeStyle = HALO;
  if (shape === 'triangle') {
    const side = Math.round(size * 0.8);
    context.beginPath();
    context.moveTo(x + w - side, y);
    context.lineTo(x + w, y);
    context.lineTo(x + w, y + side);
    context.closePath();
    context.fill();
  } else if (shape === 'dot') {
    context.beginPath();
    context.arc(x + Math.min(w / 2, size * 0.45), y + h / 2, Math.max(1.5, size * 0.3), 0, 2 * Math.PI);
    context.lineWidth = 1;
    context.fill();
    context.stroke();
  } else {
    const arm = Math.max(1.5, size * 0.32);
    const [cx, cy] = [x + w / 2, y + h / 2];
    context.beginPath();
    context.moveTo(cx - arm, cy - arm);
    context.lineTo(cx + arm, cy + arm);
    context.moveTo(cx + arm, cy - arm);
    context.lineTo(cx - arm, cy + arm);
    context.lineWidth = 3;
    context.stroke();
    context.strokeStyle = MARK_COLORS[shape];
    context.lineWidth = 1.5;
    context.stroke();
  }
}

/** A legend swatch: the mark on a mid-scale cell. */
function markSwatch(shape: MarkShape): HTMLCanvasElement {
  const canvas = el('canvas', 'jp-MlpLive-heatMarkSwatch');
  const context = sizeCanvas(canvas, 16, 11);
  if (context) {
    context.fillStyle = 'rgb(158,202,225)';
    context.fillRect(0, 0, 16, 11);
    drawMark(context, shape, 0, 0, 16, 11);
  }
  return canvas;
}

/** The legend below the heatmap. */
export class HeatLegend {
  constructor() {
    this.node = el('div', 'jp-MlpLive-heatLegend');
    const scale = el('div', 'jp-MlpLive-heatScale');
    this._gradient = el('span', 'jp-MlpLive-heatGradient');
    const noValue = el('span', 'jp-MlpLive-heatNoValue');
    this._noValueSwatch = el('span', 'jp-MlpLive-heatSwatch');
    noValue.append(this._noValueSwatch, el('span', '', 'no value'));
    scale.append(this._title, this._low, this._gradient, this._high, this._unit, noValue);
    const marks = el('div', 'jp-MlpLive-heatMarks');
    for (const kind of MARK_KINDS) {
      const item = el('span', 'jp-MlpLive-heatMarkKey');
      item.dataset.mark = kind.shape;
      item.append(markSwatch(kind.shape), el('span', '', kind.meaning));
      marks.append(item);
    }
    this.node.append(scale, marks, el('div', 'jp-MlpLive-heatHint', 'hover a cell for every metric; click it for its host’s rows'));
  }

  readonly node: HTMLElement;

  update(legend: IHeatLegend): void {
    setText(this._title, `${legend.title}:`);
    setText(this._low, legend.low);
    setText(this._high, legend.high);
    setText(this._unit, legend.unit);
    setAttr(this.node, 'data-unit', legend.unit);
    setAttr(this.node, 'title', legendText(legend));
    const gradient = `linear-gradient(to right, ${legend.stops.join(', ')})`;
    if (this._gradientKey !== gradient) {
      this._gradientKey = gradient;
      this._gradient.style.background = gradient;
      this._noValueSwatch.style.background = legend.noValue;
    }
  }

  private _title = el('span', 'jp-MlpLive-heatLegendTitle');
  private _low = el('span', 'jp-MlpLive-heatLow');
  private _high = el('span', 'jp-MlpLive-heatHigh');
  private _unit = el('span', 'jp-MlpLive-heatUnit');
  private _gradient: HTMLElement;
  private _noValueSwatch: HTMLElement;
  private _gradientKey = '';
}
