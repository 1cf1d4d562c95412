import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { GpuSample, IHostStatus, ILiveGpus } from '../src/model/documents';
import { axesCaption, heatLayout, labelStep, LEGEND_BESIDE_PX, rowLabels, shortHostNames } from '../src/model/heataxes';
import { heatCard, heatCardText } from '../src/model/heatcard';
import { heatLegend, legendText } from '../src/model/heatlegend';
import { cellAt, heatmapModel } from '../src/model/heatmap';
import { cellMarks, MARK_ECC, MARK_THROTTLE, MARK_XID, markShapes } from '../src/model/heatmarks';

function host(name: string, live: ILiveGpus | null): IHostStatus {
  return {
    name, slots: 8, index: 0, ranks: [], reachable: true, probe_ms: 1, error: null, gpus: null,
    hints: [], engines: [], live_gpus: live, health: null
  };
}

function gpus(n: number, memory = 81559, power = 700, processes: ILiveGpus['processes'] = []): ILiveGpus {
  return {
    source: 'replay',
    error: null,
    gpus: Array.from({ length: n }, (_, i) => ({
      index: i, name: 'NVIDIA H100 80GB HBM3', memory_total_mib: memory, power_limit_w: power
    })),
    processes
  };
}

const names64 = Array.from({ length: 64 }, (_, i) => `127.0.1.${i + 1}`);

test('row labels: host names less their shared prefix, cut where a part starts', () => {
  assert.deepEqual(shortHostNames(names64).prefix, '127.0.1.');
  assert.deepEqual(shortHostNames(names64).labels.slice(0, 3), ['1', '2', '3']);
  assert.deepEqual(shortHostNames(['worker00.cluster', 'worker01.cluster']), { prefix: 'worker', labels: ['00', '01'] });
  assert.deepEqual(shortHostNames(['gpu-a', 'gpu-b']), { prefix: 'gpu-', labels: ['a', 'b'] });
  assert.deepEqual(shortHostNames(['alpha', 'beta']), { prefix: '', labels: ['alpha', 'beta'] });
  assert.deepEqual(shortHostNames(['node1', 'node12']), { prefix: 'node', labels: ['1', '12'] });
  assert.deepEqual(shortHostNames(['only.example.com']), { prefix: '', labels: ['only'] });
  assert.deepEqual(shortHostNames([]), { prefix: '', labels: [] });
});

test('every k-th row labelled when rows are lower than a label', () => {
  assert.equal(labelStep(18), 1);
  assert.equal(labelStep(11), 1);
  assert.equal(labelStep(10), 2);
  assert.equal(labelStep(5), 4);
  assert.equal(labelStep(4), 4);
  assert.equal(labelStep(1), 16);
  assert.deepEqual(rowLabels(['a', 'b', 'c', 'd', 'e'], 2), [[0, 'a'], [2, 'c'], [4, 'e']]);
  assert.equal(axesCaption('127.0.1.', 2, 64),
    'rows: 64 hosts 127.0.1.* (every 2nd labelled; hover names each) · columns: GPU index');
  assert.equal(axesCaption('', 1, 1), 'rows: 1 host · columns: GPU index');
  assert.match(axesCaption('', 3, 9), /every 3rd/);
});

test('64 x 8 in the sidebar: 10 px rows, 640 px high, no wider than the sidebar', () => {
  const labels = shortHostNames(names64).labels;
  for (const width of [230, 250, 400]) {
    const layout = heatLayout(labels, 8, width);
    assert.equal(layout.cellHeight, 10);
    assert.equal(layout.gridHeight, 640);
    assert.equal(layout.step, 2);
    assert.ok(layout.left + layout.gridWidth <= width, `${width}: ${JSON.stringify(layout)}`);
    assert.ok(layout.cellWidth >= 20, 'cells wide enough to read');
    assert.equal(layout.legendBeside, width >= 364, 'the legend below the grid in a narrow sidebar');
  }
  const tab = heatLayout(labels, 8, 416);
  assert.deepEqual([tab.legendBeside, tab.cellWidth], [true, 28], 'a wide panel: the legend beside');
  assert.ok(tab.left + tab.gridWidth + LEGEND_BESIDE_PX <= 416);
  const wide = heatLayout(labels, 8, 1200);
  assert.equal(wide.cellWidth, 36, 'capped: a wide panel does not stretch the cells');
  const few = heatLayout(['a', 'b'], 4, 300);
  assert.equal(few.cellHeight, 18);
  assert.equal(few.step, 1);
  const many = heatLayout(Array.from({ length: 500 }, (_, i) => String(i)), 8, 300);
  assert.equal(many.cellHeight, 4);
  assert.equal(many.step, 4);
});

test('hit-test: the cell under a point of the grid, none outside it', () => {
  const map = heatmapModel([host('w0', gpus(8)), host('w1', gpus(8))], new Map(), 'util');
  const layout = heatLayout(['0', '1'], 8, 250);
  const w = layout.cellWidth;
  const h = layout.cellHeight;
  assert.deepEqual(cellAt(map, 0, 0, w, h), { row: 0, col: 0 });
  assert.deepEqual(cellAt(map, 7 * w + w - 1, 2 * h - 1, w, h), { row: 1, col: 7 });
  assert.equal(cellAt(map, 8 * w, 0, w, h), null);
  assert.equal(cellAt(map, 0, 2 * h, w, h), null);
  assert.equal(cellAt(map, -1, 0, w, h), null);
});

test('marks: slowed clocks (not idle), XID and ECC, each its own shape', () => {
  assert.equal(cellMarks(undefined), 0);
  assert.equal(cellMarks([50, 1, 40, 100, 0x1, 0, 0]), 0, 'idle clocks are no mark');
  assert.equal(cellMarks([50, 1, 40, 100, 0x4, 0, 0]), MARK_THROTTLE);
  assert.equal(cellMarks([50, 1, 40, 100, null, 79, 0]), MARK_XID);
  assert.equal(cellMarks([50, 1, 40, 100, 0x80, 79, 2]), MARK_THROTTLE | MARK_XID | MARK_ECC);
  assert.deepEqual(markShapes(MARK_THROTTLE | MARK_XID | MARK_ECC), ['triangle', 'dot', 'cross']);
  assert.deepEqual(markShapes(MARK_ECC), ['cross']);
});

test('the legend: range and unit of each metric, as metricValue scales it', () => {
  const hosts = [host('w0', gpus(2)), host('w1', gpus(2))];
  const latest = new Map<string, GpuSample[]>();
  const legend = (metric: 'util' | 'memory' | 'temperature' | 'power', list = hosts) =>
    legendText(heatLegend(heatmapModel(list, latest, metric)));
  assert.equal(legend('util'), 'utilisation: 0 – 100 %');
  assert.equal(legend('memory'), 'memory used: 0 – 79.6 GiB');
  assert.equal(legend('temperature'), 'temperature: ≤30 – ≥90 °C');
  assert.equal(legend('power'), 'power draw: 0 – 700 W (power limit)');
  const mixed = [host('a', gpus(1, 81559, 700)), host('b', gpus(1, 40960, 400))];
  assert.equal(legend('memory', mixed), "memory used: 0 – 100 % of each GPU's memory");
  assert.equal(legend('power', mixed), "power draw: 0 – 100 % of each GPU's power limit");
  const full = heatLegend(heatmapModel(hosts, latest, 'util'));
  assert.equal(full.stops[0], 'rgb(237,248,251)');
  assert.equal(full.stops[full.stops.length - 1], 'rgb(63,0,125)');
  assert.equal(full.noValue, 'rgb(128,128,128)');
});

test('the hover card: host and GPU, every metric with its unit, marks, memory by rank', () => {
  const live = gpus(2, 81559, 700, [[1, 3, 4242, 12288], [1, null, 777, 1024]]);
  const hosts = [host('127.0.1.3', live)];
  const latest = new Map<string, GpuSample[]>([
    ['127.0.1.3', [[100, 75370, 38, 152, 0, 0, 0], [97, 13312, 81, 690.5, 0x4 | 0x80, 79, 2]]]
  ]);
  const map = heatmapModel(hosts, latest, 'power');
  const card = heatCard(map, 0, 1);
  assert.ok(card);
  assert.equal(heatCardText(card), [
    '127.0.1.3 · GPU1 (NVIDIA H100 80GB HBM3)',
    'utilisation: 97 %',
    'memory: 13.0 / 79.6 GiB (16 %)',
    'temperature: 81 °C',
    'power: 691 / 700 W',
    'clocks slowed: SW power cap, HW thermal',
    'XID 79',
    '2 uncorrected ECC errors',
    'memory by rank: rank 3: 12.0 GiB, pid 777: 1.0 GiB'
  ].join('\n'));
  assert.deepEqual(card.marks.map(m => m[0]), ['triangle', 'dot', 'cross']);
  const quiet = heatCard(map, 0, 0);
  assert.equal(quiet?.memoryNote, 'no compute process on this GPU');
  assert.deepEqual(quiet?.marks, []);
  assert.equal(heatCard(map, 1, 0), null, 'no such row');
  assert.equal(heatCard(map, 0, 2), null, 'no such column');
});

test('the hover card of a GPU with no sample yet, and of a missing GPU', () => {
  const hosts = [host('w0', gpus(8)), host('w1', gpus(4))];
  const map = heatmapModel(hosts, new Map([['w0', []]]), 'util');
  const unsampled = heatCard(map, 0, 2);
  assert.deepEqual(unsampled?.metrics.map(m => m[1]), ['n/a', 'n/a', 'n/a', 'n/a']);
  const missing = heatCard(map, 1, 6);
  assert.equal(missing?.title, 'w1 · GPU6');
  assert.equal(missing?.memoryNote, 'w1 has no GPU6');
});
