/**
 * A GPU's sparkline: utilisation (solid) and memory (dashed) over the last 10 minutes, on a
 * small canvas. Drawn by the GPU rows (gpusection.ts) and the heatmap's hover card (heatcard.ts).
 */
import { GpuSeries, sparkPoints } from '../model/gpuhistory';
import { sizeCanvas } from './dom';

/** The sparklines' window, in seconds. */
export const SPARK_WINDOW_S = 600;
export const SPARK_WIDTH = 120;
export const SPARK_HEIGHT = 22;

export interface ISparkColors {
  util: string;
  mem: string;
}

/** The theme's colours for the sparklines (read once per drawing pass). */
export function sparkColors(node: HTMLElement): ISparkColors {
  const style = getComputedStyle(node);
  return {
    util: style.getPropertyValue('--jp-warn-color1').trim() || '#f57c00',
    mem: style.getPropertyValue('--jp-brand-color2').trim() || '#64b5f6'
  };
}

/** Utilisation (solid) and memory (dashed, as a share of the most seen) over 10 minutes. */
export function drawSparkline(
  canvas: HTMLCanvasElement,
  series: GpuSeries,
  nowS: number,
  colors: ISparkColors,
  width = SPARK_WIDTH,
  height = SPARK_HEIGHT
): void {
  const context = sizeCanvas(canvas, width, height);
  if (!context) {
    return;
  }
  context.clearRect(0, 0, width, height);
  let memMax = 0;
  for (let i = 0; i < series.mem.length; i++) {
    const v = series.mem.get(i);
    if (v > memMax) {
      memMax = v;
    }
  }
  const lines: [typeof series.util, number, string, number[]][] = [
    [series.mem, memMax, colors.mem, [2, 2]],
    [series.util, 100, colors.util, []]
  ];
  for (const [values, max, color, dash] of lines) {
    const points = sparkPoints(series.t, values, nowS, SPARK_WINDOW_S, max, width, height - 1);
    strokePoints(context, points, color, dash);
  }
}

/** One line through `points`, broken where a point is null (an unknown value). */
function strokePoints(
  context: CanvasRenderingContext2D,
  points: ([number, number] | null)[],
  color: string,
  dash: number[]
): void {
  context.beginPath();
  context.setLineDash(dash);
  context.strokeStyle = color;
  context.lineWidth = 1;
  let pen = false;
  for (const point of points) {
    if (!point) {
      pen = false;
      continue;
    }
    if (pen) {
      context.lineTo(point[0], point[1] + 0.5);
    } else {
      context.moveTo(point[0], point[1] + 0.5);
      pen = true;
    }
  }
  context.stroke();
}
