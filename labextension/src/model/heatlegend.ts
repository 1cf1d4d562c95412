/**
 * The heatmap's colour legend (pure: no DOM): what the chosen metric's lightest and darkest
 * colours stand for, in its unit, as heatmap.ts metricValue scales it.
 */
import { gib } from './gpus';
import { HEAT_METRICS, HEAT_STOPS, IHeatmap, NO_VALUE_COLOR, TEMP_HIGH, TEMP_LOW } from './heatmap';

export interface IHeatLegend {
  /** "utilisation", "memory used", "temperature", "power draw". */
  title: string;
  /** The values at the lightest and the darkest colour ("0", "100"). */
  low: string;
  high: string;
  /** "%", "GiB", "°C", "W", or "% of each GPU's limit" where GPUs differ. */
  unit: string;
  /** The gradient's colours, lightest first ("rgb(...)"). */
  stops: string[];
  /** The colour of a cell with no value. */
  noValue: string;
}

const TITLES: { [metric: string]: string } = {
  util: 'utilisation',
  memory: 'memory used',
  temperature: 'temperature',
  power: 'power draw'
};

/** The legend of a heatmap's metric. */
export function heatLegend(map: Pick<IHeatmap, 'metric' | 'memoryTotalMib' | 'powerLimitW'>): IHeatLegend {
  const title = TITLES[map.metric] ?? HEAT_METRICS.find(m => m[0] === map.metric)?.[1] ?? map.metric;
  const stops = HEAT_STOPS.map(([r, g, b]) => `rgb(${r},${g},${b})`);
  const legend = { title, stops, noValue: NO_VALUE_COLOR };
  switch (map.metric) {
    case 'memory':
      return map.memoryTotalMib
        ? { ...legend, low: '0', high: gib(map.memoryTotalMib), unit: 'GiB' }
        : { ...legend, low: '0', high: '100', unit: "% of each GPU's memory" };
    case 'temperature':
      return { ...legend, low: `≤${TEMP_LOW}`, high: `≥${TEMP_HIGH}`, unit: '°C' };
    case 'power':
      return map.powerLimitW
        ? { ...legend, low: '0', high: String(Math.round(map.powerLimitW)), unit: 'W (power limit)' }
        : { ...legend, low: '0', high: '100', unit: "% of each GPU's power limit" };
    default:
      return { ...legend, low: '0', high: '100', unit: '%' };
  }
}

/** "utilisation: 0 – 100 %", the legend in one line (its title, for screen readers). */
export function legendText(legend: IHeatLegend): string {
  return `${legend.title}: ${legend.low} – ${legend.high} ${legend.unit}`;
}
