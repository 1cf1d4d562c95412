/**
 * The marks a heatmap cell carries besides its colour (pure: no DOM): a GPU whose clocks are
 * slowed (power cap, thermal, HW slowdown or power brake: gpus.ts decodeThrottle), one that
 * reported an XID, one with uncorrected ECC errors. Each has its own shape, drawn on the cell and
 * explained in the legend.
 */
import type { GpuSample } from './documents';
import { decodeThrottle, ECC, THROTTLE, XID } from './gpus';

/** Bits of a cell's marks. */
export const MARK_THROTTLE = 1;
export const MARK_XID = 2;
export const MARK_ECC = 4;

export type MarkShape = 'triangle' | 'dot' | 'cross';

export interface IMarkKind {
  bit: number;
  shape: MarkShape;
  /** What the legend says of it. */
  meaning: string;
}

/** The marks in the order the legend lists them. */
export const MARK_KINDS: IMarkKind[] = [
  { bit: MARK_THROTTLE, shape: 'triangle', meaning: 'clocks slowed (power cap, thermal, HW slowdown)' },
  { bit: MARK_XID, shape: 'dot', meaning: 'XID error' },
  { bit: MARK_ECC, shape: 'cross', meaning: 'uncorrected ECC errors' }
];

/** The marks of one GPU's sample (0: none, or no sample). */
export function cellMarks(sample: GpuSample | undefined): number {
  if (!sample) {
    return 0;
  }
  let marks = 0;
  if (decodeThrottle(sample[THROTTLE]).slowing) {
    marks |= MARK_THROTTLE;
  }
  if (sample[XID]) {
    marks |= MARK_XID;
  }
  if (sample[ECC]) {
    marks |= MARK_ECC;
  }
  return marks;
}

/** The shapes of a cell's marks, in the legend's order. */
export function markShapes(marks: number): MarkShape[] {
  return MARK_KINDS.filter(kind => marks & kind.bit).map(kind => kind.shape);
}
