/**
 * The rank grid of a large World (model/grid.ts, model/gridtext.ts, gridSummaryLine): where the
 * cells lie, what the mouse hits and selects, and what the grid says in words.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import type { IRank, IWorld } from '../src/model/documents';
import {
  CELL_GAP,
  clickSelection,
  dragSelection,
  gridLayout,
  IGridLayout,
  IGridSelection,
  LINE_PITCH,
  MIN_CELL_WIDTH,
  rankAt,
  rankRange,
  ranksInRect,
  shortHostLabels,
  showsGrid
} from '../src/model/grid';
import { cellTooltip, LAST_LINE_CHARS, lastLineOf, legendCounts, stragglerLine } from '../src/model/gridtext';
import { STATE_ORDER } from '../src/model/ranks';
import { gridSummaryLine, summaryLine } from '../src/model/worlds';

const NOW = Date.parse('2026-11-25T10:00:00.000+00:00');

function ago(seconds: number): string {
  return new Date(NOW - seconds * 1000).toISOString().replace('Z', '+00:00');
}

/** `hosts` hosts of `perHost` ranks each, named as the browser test's hostfile names them. */
function ranksOn(hosts: number, perHost: number, state = 'busy', sinceS = 43): IRank[] {
  return Array.from({ length: hosts * perHost }, (_, r) => ({
    rank: r,
    host: `127.0.1.${Math.floor(r / perHost) + 1}`,
    state,
    since: ago(sinceS),
    last_output: null
  }));
}

function world(ranks: IRank[], extra: Partial<IWorld> = {}): IWorld {
  return { id: 'worker0-4766-1', pid: 4766, state: 'running', np: ranks.length, ranks, ...extra };
}

/** Every cell inside the width, none overlapping another, every rank with one. */
function assertSound(layout: IGridLayout, ranks: IRank[], width: number): void {
  assert.equal(layout.cells.size, ranks.length);
  const seen = new Set<string>();
  for (const cell of layout.cells.values()) {
    assert.ok(cell.x >= layout.labelWidth && cell.x + cell.width <= width, `rank ${cell.rank} inside ${width} px`);
    assert.ok(cell.width >= MIN_CELL_WIDTH && cell.y + cell.height <= layout.height);
    const at = `${cell.x},${cell.y}`;
    assert.ok(!seen.has(at), `two cells at ${at}`);
    seen.add(at);
  }
}

test('the grid is for Worlds of more than 16 ranks; smaller ones keep their rows', () => {
  assert.equal(showsGrid(16), false);
  assert.equal(showsGrid(17), true);
  assert.equal(showsGrid(512), true);
});

test('64 hosts x 8 ranks fit 640 px high, wide or in the sidebar, with no horizontal scrolling', () => {
  const ranks = ranksOn(64, 8);
  for (const width of [1000, 232, 120]) {
    const layout = gridLayout(ranks, width);
    assertSound(layout, ranks, width);
    assert.equal(layout.columns, 8, `one line per host at ${width} px`);
    assert.equal(layout.height, 640);
    assert.ok(layout.width <= width);
    assert.equal(layout.hosts.length, 64);
  }
  // Its widest (the view's flex basis): every host's cells at their widest on one line.
  const natural = gridLayout(ranks, Infinity);
  assert.deepEqual([natural.columns, natural.cellWidth, natural.width], [8, 28, natural.labelWidth + 8 * 29 - 1]);
  assert.equal(LINE_PITCH, 10);
  // Host 3's ranks are on its line, in rank order.
  const wide = gridLayout(ranks, 1000);
  assert.deepEqual(
    [24, 25, 31].map(r => [wide.cells.get(r)!.y, wide.cells.get(r)!.local]),
    [[30, 0], [30, 1], [30, 7]]
  );
  assert.equal(wide.hosts[3].label, '4');
});

test('64 ranks on one host wrap into lines; hosts of different sizes keep their own lines', () => {
  const one = ranksOn(1, 64);
  const narrow = gridLayout(one, 200);
  assertSound(narrow, one, 200);
  assert.ok(narrow.columns < 64 && narrow.hosts[0].lines === Math.ceil(64 / narrow.columns));
  assert.equal(narrow.height, narrow.hosts[0].lines * LINE_PITCH);
  const wide = gridLayout(one, 1400);
  assert.equal(wide.columns, 64);
  assert.equal(wide.height, LINE_PITCH);

  const mixed: IRank[] = [...ranksOn(1, 2), ...ranksOn(1, 20).map(r => ({ ...r, rank: r.rank + 2, host: 'big' }))];
  const layout = gridLayout(mixed, 150);
  assertSound(layout, mixed, 150);
  assert.deepEqual(layout.hosts.map(h => [h.ranks.length, h.firstLine]), [[2, 0], [20, 1]]);
  assert.equal(layout.lineHosts.length, 1 + Math.ceil(20 / layout.columns));
});

test('the point under the mouse names the rank of its cell, and nothing outside the cells', () => {
  const ranks = ranksOn(64, 8);
  const layout = gridLayout(ranks, 232);
  for (const cell of layout.cells.values()) {
    assert.equal(rankAt(layout, cell.x + cell.width / 2, cell.y + cell.height / 2), cell.rank);
    assert.equal(rankAt(layout, cell.x, cell.y), cell.rank);
  }
  assert.equal(rankAt(layout, 1, 5), null); // the host label
  assert.equal(rankAt(layout, layout.labelWidth + 1, -1), null);
  assert.equal(rankAt(layout, layout.labelWidth + 1, 640), null); // under the last host
  assert.equal(rankAt(layout, layout.width + CELL_GAP + 1, 5), null); // right of the cells

  const short = [...ranksOn(1, 8), ...ranksOn(1, 3).map(r => ({ ...r, rank: r.rank + 8, host: 'h2' }))];
  const uneven = gridLayout(short, 232);
  const eighth = uneven.cells.get(7)!;
  assert.equal(rankAt(uneven, eighth.x + 1, LINE_PITCH + 1), null); // host h2 has no 4th cell
});

test('a rectangle selects the ranks whose cells it touches, dragged either way', () => {
  const layout = gridLayout(ranksOn(64, 8), 232);
  const a = layout.cells.get(9)!; // host 1, local 1
  const b = layout.cells.get(26)!; // host 3, local 2
  const expected = [9, 10, 17, 18, 25, 26];
  assert.deepEqual(ranksInRect(layout, a.x + 1, a.y + 1, b.x + 1, b.y + 1), expected);
  assert.deepEqual(ranksInRect(layout, b.x + 1, b.y + 1, a.x + 1, a.y + 1), expected);
  assert.deepEqual(ranksInRect(layout, 0, 0, 1, 1), []);
});

test('click selects one, shift-click the ranks between, ctrl-click toggles, drag adds with ctrl', () => {
  const present = ranksOn(64, 8).map(r => r.rank);
  const none: IGridSelection = { selected: new Set(), anchor: null };
  const one = clickSelection(none, 17, 'one', present);
  assert.deepEqual([...one.selected], [17]);
  const range = clickSelection(one, 21, 'range', present);
  assert.deepEqual([...range.selected], [17, 18, 19, 20, 21]);
  assert.equal(range.anchor, 17);
  const back = clickSelection(range, 15, 'range', present);
  assert.deepEqual([...back.selected], [15, 16, 17]); // from the same anchor, the other way
  const toggled = clickSelection(back, 301, 'toggle', present);
  assert.deepEqual([...toggled.selected].sort((a, b) => a - b), [15, 16, 17, 301]);
  assert.deepEqual([...clickSelection(toggled, 16, 'toggle', present).selected].sort((a, b) => a - b), [15, 17, 301]);
  assert.deepEqual([...clickSelection(none, 4, 'range', present).selected], [4]); // no anchor yet
  assert.deepEqual([...clickSelection(toggled, 3, 'one', present).selected], [3]);
  assert.deepEqual(rankRange([0, 2, 5, 9], 8, 1), [2, 5]); // only the ranks the World has
  assert.deepEqual([...dragSelection(one, [1, 2], false).selected], [1, 2]);
  assert.deepEqual([...dragSelection(one, [1, 2], true).selected], [17, 1, 2]);
});

test('host labels are short and tell the hosts apart', () => {
  const ips = Array.from({ length: 64 }, (_, h) => `127.0.1.${h + 1}`);
  assert.deepEqual(shortHostLabels(ips).slice(0, 3), ['1', '2', '3']);
  assert.deepEqual(shortHostLabels(['w10', 'w11', 'w12']), ['10', '11', '12']); // not '0', '1', '2'
  assert.deepEqual(shortHostLabels(['worker0', 'worker12']), ['0', '12']);
  assert.deepEqual(shortHostLabels(['gpu-a01.cluster.local', 'gpu-b02.cluster.local']), ['a01', 'b02']);
  assert.deepEqual(shortHostLabels(['averyveryverylonghost']), ['…nghost']); // the end tells hosts apart
});

test('the one line of a grid World: largest group first, few others named, the cell last', () => {
  const ranks = ranksOn(64, 8, 'busy', 252).map(r => (r.rank === 17 || r.rank === 301 ? { ...r, state: 'idle', since: ago(3) } : r));
  const cell = { first_line: 'for step in range(steps): train(model, step)', started: ago(253), ranks: [] };
  assert.equal(
    gridSummaryLine(world(ranks, { cell }), NOW),
    '512 ranks: 510 busy 4m12 · 2 idle (17, 301) · cell "for step in range(steps): t…" 4m13'
  );
  // A third busy, two thirds idle (the browser test's flips): the count of the largest group first.
  const flipped = ranks.map(r => ({ ...r, state: r.rank % 3 ? 'idle' : 'busy' }));
  assert.match(gridSummaryLine(world(flipped), NOW), /^512 ranks: 341 idle 4m12 · 171 busy$/);
  const some = { ...cell, first_line: 'x = 1', ranks: [0, 1, 2, 3] };
  assert.match(gridSummaryLine(world(ranks, { cell: some }), NOW), / · cell "x = 1" 4m13 on ranks 0-3$/);
  assert.equal(gridSummaryLine(world([]), NOW), summaryLine(world([]), NOW));
});

test('a cell tooltip names the rank, its host, its state and age, its last output and why it straggles', () => {
  const rank: IRank = { rank: 17, host: '127.0.1.3', state: 'busy', since: ago(252), last_output: ago(40) };
  const text = cellTooltip(rank, 1, NOW, 'silent 40 s while the others wrote 2 s ago');
  assert.deepEqual(text.split('\n').slice(0, 4), [
    'rank 17 on 127.0.1.3 (local rank 1)',
    'busy for 4 min 12 s',
    'last output 40 s ago',
    'straggler: silent 40 s while the others wrote 2 s ago'
  ]);
  const paused = cellTooltip({ ...rank, state: 'paused', since: null, last_output: null }, 0, NOW);
  assert.match(paused, /^rank 17 on 127\.0\.1\.3 \(local rank 0\)\npaused\nno output in this World\nstopped at a breakpoint/);
});

test("a tooltip shows the rank's last output line, read from its log's tail, cut to a line's width", () => {
  assert.equal(lastLineOf('step 1 loss 0.5\nstep 2 loss 0.4\n\n  \n'), 'step 2 loss 0.4');
  assert.equal(lastLineOf('progress 10%\rprogress 20%\r'), 'progress 20%');
  assert.equal(lastLineOf(''), '');
  const long = lastLineOf('x'.repeat(500));
  assert.equal(long.length, LAST_LINE_CHARS);
  assert.ok(long.endsWith('…'));
  const rank: IRank = { rank: 3, host: 'w0', state: 'busy', since: ago(10), last_output: ago(2) };
  assert.deepEqual(cellTooltip(rank, 3, NOW, undefined, 'step 2 loss 0.4').split('\n').slice(2, 4), [
    'last output 2 s ago',
    '  step 2 loss 0.4'
  ]);
  const silent = { ...rank, last_output: null };
  assert.ok(!cellTooltip(silent, 3, NOW, undefined, 'stale line').includes('stale line'));
});

test('the legend counts every state, in the list order, and the stragglers fold into one line', () => {
  const ranks = [...ranksOn(2, 8, 'idle'), { rank: 99, host: 'x', state: 'weird' }];
  ranks[3] = { ...ranks[3], state: 'dead' };
  assert.deepEqual(legendCounts(ranks), [
    { state: 'busy', count: 0 },
    { state: 'paused', count: 0 },
    { state: 'idle', count: 15 },
    { state: 'starting', count: 0 },
    { state: 'dead', count: 1 },
    { state: 'weird', count: 1 }
  ]);
  assert.equal(stragglerLine([]), '');
  assert.equal(stragglerLine([5]), '1 straggler outlined: rank 5');
  assert.equal(stragglerLine([2, 5, 9]), '3 stragglers outlined: ranks 2,5,9');
  assert.equal(stragglerLine([1, 3, 5, 7, 9, 11]), '6 stragglers outlined: ranks 1,3,5,7 +2');
});

/** The colour variable a stylesheet's rule for `selector` sets with `property`. */
function colourOf(file: string, selector: string, property: string): string | undefined {
  // Run from test-build/test/: the stylesheets are two folders up.
  const css = readFileSync(resolve(__dirname, '../../style', file), 'utf8');
  const escaped = selector.replace(/[[\]().*]/g, m => `\\${m}`);
  const rule = new RegExp(`${escaped}[^{]*\\{[^}]*?(?:^|\\s|;)${property}:\\s*(var\\([^)]*\\))`, 'm');
  return css.match(rule)?.[1];
}

test("the grid's cells and legend take the rank list's state colours", () => {
  for (const state of STATE_ORDER) {
    const list =
      colourOf('base.css', `.jp-MlpLive-rank[data-state='${state}'] .jp-MlpLive-rankState`, 'color') ??
      colourOf('base.css', `.jp-MlpLive-rank[data-state='${state}']`, 'color');
    const cell = colourOf('grid.css', `.jp-MlpLive-gridCell[data-state='${state}']`, 'background');
    const swatch = colourOf('grid.css', `.jp-MlpLive-gridKey[data-state='${state}'] .jp-MlpLive-gridSwatch`, 'background');
    assert.ok(list, `no list colour for ${state}`);
    assert.deepEqual([cell, swatch], [list, list], state);
  }
});
