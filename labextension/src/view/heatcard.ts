/**
 * The heatmap's hover card: the host and GPU, every metric with its unit, the cell's marks and
 * what they mean, which rank holds what memory there, and the host's GPUs' sparklines (the
 * hovered one outlined). Redrawn when the hovered cell changes or new samples come, not per frame.
 */
import { GpuSeries } from '../model/gpuhistory';
import { IHeatCard } from '../model/heatcard';
import { el, setText } from './dom';
import { drawMark } from './heatlegend';
import { drawSparkline, ISparkColors } from './sparklines';

const CARD_SPARK_WIDTH = 84;
const CARD_SPARK_HEIGHT = 16;

/** A mark's shape, drawn small before its text. */
function markIcon(shape: IHeatCard['marks'][number][0]): HTMLCanvasElement {
  const canvas = el('canvas', 'jp-MlpLive-heatMarkSwatch');
  canvas.width = 12;
  canvas.height = 10;
  const context = canvas.getContext('2d');
  if (context) {
    context.fillStyle = 'rgb(158,202,225)';
    context.fillRect(0, 0, 12, 10);
    drawMark(context, shape, 0, 0, 12, 10);
  }
  return canvas;
}

/** One sparkline of the host's GPU `index`, labelled, outlined when it is the hovered GPU. */
function sparkCell(index: number, series: GpuSeries, nowS: number, colors: ISparkColors, hovered: boolean): HTMLElement {
  const cell = el('div', `jp-MlpLive-heatCardSpark${hovered ? ' jp-mod-hovered' : ''}`);
  const canvas = el('canvas');
  drawSparkline(canvas, series, nowS, colors, CARD_SPARK_WIDTH, CARD_SPARK_HEIGHT);
  cell.append(el('span', 'jp-MlpLive-heatCardSparkLabel', String(index)), canvas);
  return cell;
}

/** The card: one per heatmap, shown over it near the hovered cell. */
export class HeatCard {
  constructor() {
    this.node = el('div', 'jp-MlpLive-heatCard');
    this.node.hidden = true;
    this.node.setAttribute('role', 'tooltip');
  }

  readonly node: HTMLElement;

  /** Fills the card for `card`, with the host's GPUs' `series` (none: no history yet). */
  show(card: IHeatCard, series: GpuSeries[] | undefined, nowS: number, colors: ISparkColors): void {
    const title = el('div', 'jp-MlpLive-heatCardTitle', card.title);
    const parts: HTMLElement[] = [title];
    if (card.model) {
      parts.push(el('div', 'jp-MlpLive-heatCardModel', card.model));
    }
    const table = el('div', 'jp-MlpLive-heatCardMetrics');
    for (const [name, value] of card.metrics) {
      table.append(el('span', 'jp-MlpLive-heatCardName', name), el('span', 'jp-MlpLive-heatCardValue', value));
    }
    parts.push(table);
    for (const [shape, text] of card.marks) {
      const line = el('div', 'jp-MlpLive-heatCardMark');
      line.append(markIcon(shape), el('span', '', text));
      parts.push(line);
    }
    const memory = card.memoryByRank.length ? `memory by rank: ${card.memoryByRank.join(', ')}` : card.memoryNote;
    parts.push(el('div', 'jp-MlpLive-heatCardMemory', memory));
    if (series && series.length) {
      parts.push(el('div', 'jp-MlpLive-heatCardSparkTitle', `${card.host}'s GPUs, last 10 min: utilisation solid, memory dashed`));
      const sparks = el('div', 'jp-MlpLive-heatCardSparks');
      sparks.append(...series.map((s, i) => sparkCell(i, s, nowS, colors, i === card.gpu)));
      parts.push(sparks);
    }
    this.node.replaceChildren(...parts);
    this.node.dataset.host = card.host;
    this.node.dataset.gpu = String(card.gpu);
    this.node.hidden = false;
  }

  /** Places the card below the point (x, y) of its box, or above when it would leave the box. */
  place(x: number, y: number, boxWidth: number, boxHeight: number): void {
    const width = this.node.offsetWidth;
    const height = this.node.offsetHeight;
    const left = Math.max(0, Math.min(x + 12, boxWidth - width));
    const below = y + 14;
    const top = below + height > boxHeight && y - height - 6 >= 0 ? y - height - 6 : below;
    this.node.style.left = `${left}px`;
    this.node.style.top = `${top}px`;
  }

  hide(): void {
    this.node.hidden = true;
    setText(this.node, '');
    delete this.node.dataset.host;
  }
}
