import { test } from 'node:test';
import assert from 'node:assert/strict';

import { GpuHistory, GpuSeries, HISTORY_SAMPLES, RingBuffer, sparkPoints } from '../src/model/gpuhistory';

test('a ring buffer drops the oldest value when full', () => {
  const ring = new RingBuffer(3);
  assert.equal(ring.length, 0);
  assert.ok(isNaN(ring.last()));
  ring.push(1);
  ring.push(2);
  assert.deepEqual(ring.toArray(), [1, 2]);
  ring.push(3);
  ring.push(4);
  ring.push(5);
  assert.deepEqual(ring.toArray(), [3, 4, 5]);
  assert.equal(ring.length, 3);
  assert.equal(ring.get(0), 3);
  assert.equal(ring.last(), 5);
  assert.ok(isNaN(ring.get(3)));
  assert.ok(isNaN(ring.get(-1)));
  ring.push(null);
  assert.deepEqual(ring.toArray().map(v => (isNaN(v) ? 'NaN' : v)), [4, 5, 'NaN']);
  // Many wraps.
  const big = new RingBuffer(600);
  for (let i = 0; i < 1000; i++) {
    big.push(i);
  }
  assert.equal(big.length, 600);
  assert.equal(big.get(0), 400);
  assert.equal(big.last(), 999);
  assert.throws(() => new RingBuffer(0));
});

test('a GPU series keeps time order and ignores points not newer than the last', () => {
  const series = new GpuSeries(4);
  assert.ok(series.push(10, 50, 100));
  assert.ok(!series.push(10, 60, 100));
  assert.ok(!series.push(5, 60, 100));
  assert.ok(series.push(11, null, 200));
  assert.deepEqual(series.t.toArray(), [10, 11]);
  assert.deepEqual(series.mem.toArray(), [100, 200]);
});

test('the history keeps at least 600 samples per GPU, fed by gpus messages', () => {
  assert.ok(HISTORY_SAMPLES >= 600);
  const history = new GpuHistory();
  for (let t = 1; t <= 700; t++) {
    history.addSamples({ t, hosts: { w0: [[t % 100, t, 40, 300, 0, 0, 0], [1, 2, 3, 4, 0, 0, 0]] } });
  }
  const gpu0 = history.seriesOf('w0', 0);
  assert.equal(gpu0.t.length, HISTORY_SAMPLES);
  assert.equal(gpu0.t.get(0), 700 - HISTORY_SAMPLES + 1);
  assert.equal(gpu0.mem.last(), 700);
  assert.equal(history.series.get('w0')?.length, 2);
  assert.deepEqual(history.latest.get('w0')?.[1], [1, 2, 3, 4, 0, 0, 0]);
  assert.equal(history.latestT, 700);
});

test('gpu_history seeds the series; samples after it follow; a re-sent history is ignored', () => {
  const history = new GpuHistory(100);
  const seed = { t0: 1000, step_s: 10, hosts: { w0: { util: [[10, null, 30]], mem: [[1, 2, 3]] } } };
  history.seed(seed);
  const s = history.seriesOf('w0', 0);
  assert.deepEqual(s.t.toArray(), [1000, 1010, 1020]);
  assert.deepEqual(s.util.toArray().map(v => (isNaN(v) ? null : v)), [10, null, 30]);
  history.addSamples({ t: 1021, hosts: { w0: [[40, 4, 0, 0, 0, 0, 0]] } });
  history.seed(seed); // a reconnect sends it again
  assert.deepEqual(s.t.toArray(), [1000, 1010, 1020, 1021]);
  // A long history keeps its newest points.
  const long = new GpuHistory(5);
  long.seed({ t0: 0, step_s: 1, hosts: { a: { util: [Array.from({ length: 9 }, (_, i) => i)], mem: [] } } });
  assert.deepEqual(long.seriesOf('a', 0).util.toArray(), [4, 5, 6, 7, 8]);
  long.keepOnly(new Set(['b']));
  assert.equal(long.series.size, 0);
});

test('sparkline points over the last window, gaps for unknown values', () => {
  const series = new GpuSeries(10);
  series.push(100, 0, 0);
  series.push(400, 50, 0);
  series.push(500, null, 0);
  series.push(700, 100, 0);
  const points = sparkPoints(series.t, series.util, 700, 600, 100, 60, 20);
  assert.deepEqual(points, [[0, 20], [30, 10], null, [60, 0]]);
  assert.deepEqual(sparkPoints(series.t, series.util, 700, 100, 0, 60, 20), [null]);
});
