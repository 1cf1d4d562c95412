import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { GpuSample, IHostStatus, ILiveGpus } from '../src/model/documents';
import { decodeThrottle, gpuErrors, hostGpuView } from '../src/model/gpus';
import { cellAt, heatCellText, heatColor, heatmapModel, metricValue } from '../src/model/heatmap';

function host(name: string, live: ILiveGpus | null, gpus: IHostStatus['gpus'] = null): IHostStatus {
  return {
    name, slots: 8, index: 0, ranks: [], reachable: true, probe_ms: 1, error: null, gpus,
    hints: [], engines: [], live_gpus: live, health: null
  };
}

function h100s(n: number): ILiveGpus {
  return {
    source: 'replay',
    error: null,
    gpus: Array.from({ length: n }, (_, i) => ({
      index: i, name: 'NVIDIA H100 80GB HBM3', memory_total_mib: 81559, power_limit_w: 700
    })),
    processes: []
  };
}

test('throttle reasons decoded from the NVML bits', () => {
  assert.deepEqual(decodeThrottle(0), { reasons: [], slowing: false });
  assert.deepEqual(decodeThrottle(null), { reasons: [], slowing: false });
  assert.deepEqual(decodeThrottle(0x1), { reasons: ['idle'], slowing: false });
  assert.deepEqual(decodeThrottle(0x2 | 0x200), { reasons: ['applications clocks', 'display clocks'], slowing: false });
  assert.deepEqual(decodeThrottle(0x4), { reasons: ['SW power cap'], slowing: true });
  assert.deepEqual(decodeThrottle(0x8 | 0x80), { reasons: ['HW slowdown', 'HW thermal'], slowing: true });
  assert.deepEqual(decodeThrottle(0x40 | 0x100 | 0x20), { reasons: ['sync boost', 'SW thermal', 'HW power brake'], slowing: true });
  assert.deepEqual(decodeThrottle(0x1 | 0x400), { reasons: ['idle', '0x400'], slowing: true });
});

test('XID and ECC are errors', () => {
  assert.deepEqual(gpuErrors([50, 100, 40, 200, 0, 0, 0]), []);
  assert.deepEqual(gpuErrors([50, 100, 40, 200, 0, 79, 0]), ['XID 79']);
  assert.deepEqual(gpuErrors([50, 100, 40, 200, 0, 0, 1]), ['1 uncorrected ECC error']);
  assert.deepEqual(gpuErrors([null, null, null, null, null, 13, 3]), ['XID 13', '3 uncorrected ECC errors']);
  assert.deepEqual(gpuErrors(undefined), []);
});

test('a sampled host: values, throttling, errors, and which rank holds what', () => {
  const live = h100s(2);
  live.processes = [[1, 3, 4242, 12288], [0, 0, 4240, 61230], [1, null, 999, 1024], [1, 2, 4241, 2048]];
  const samples: GpuSample[] = [
    [97, 61230, 64.4, 350.2, 0x0, 0, 0],
    [null, null, null, null, 0x4 | 0x1, 79, 2]
  ];
  const view = hostGpuView(host('w0', live), samples);
  assert.equal(view.state, 'live');
  assert.equal(view.models, '2 × NVIDIA H100 80GB HBM3');
  const [g0, g1] = view.gpus;
  assert.equal(g0.label, 'GPU0');
  assert.equal(g0.utilText, '97% util');
  assert.equal(g0.memText, '59.8 / 79.6 GiB');
  assert.ok(Math.abs((g0.memFraction as number) - 61230 / 81559) < 1e-9);
  assert.equal(g0.tempText, '64 °C');
  assert.equal(g0.powerText, '350 / 700 W');
  assert.deepEqual(g0.processes.map(p => p.text), ['rank 0: 59.8 GiB']);
  assert.equal(g1.utilText, 'util n/a');
  assert.equal(g1.memText, '? / 79.6 GiB');
  assert.equal(g1.utilFraction, null);
  assert.deepEqual(g1.throttle, { reasons: ['idle', 'SW power cap'], slowing: true });
  assert.deepEqual(g1.errors, ['XID 79', '2 uncorrected ECC errors']);
  assert.deepEqual(g1.processes.map(p => p.text), ['rank 2: 2.0 GiB', 'rank 3: 12.0 GiB', 'pid 999: 1.0 GiB']);
  // Before the first sample.
  assert.equal(hostGpuView(host('w0', live), undefined).gpus[0].utilText, 'util n/a');
});

test('hosts without GPUs, with a sampler error, and without a sampler', () => {
  const none = hostGpuView(host('cpu0', { source: 'none', error: 'no GPUs', gpus: [], processes: [] }), undefined);
  assert.deepEqual([none.state, none.message, none.gpus], ['nogpu', 'no GPUs', []]);
  const broken = hostGpuView(host('w1', { source: 'none', error: 'NVML: driver not loaded', gpus: [], processes: [] }), undefined);
  assert.deepEqual([broken.state, broken.message], ['nogpu', 'NVML: driver not loaded']);
  const unknown = hostGpuView(host('w2', null), undefined);
  assert.deepEqual([unknown.state, unknown.message], ['unknown', 'GPUs not sampled']);
  const inventory = hostGpuView(
    host('w3', null, {
      source: 'nvml', nics: [], error: null,
      gpus: [{ index: 0, name: 'NVIDIA A100', memory_total_mib: 40960, memory_used_mib: 1024, utilization_pct: 3 }]
    }),
    undefined
  );
  assert.equal(inventory.state, 'inventory');
  assert.equal(inventory.gpus[0].memText, '1.0 / 40.0 GiB');
  assert.equal(inventory.gpus[0].utilText, '3% util');
  const emptyInventory = hostGpuView(host('w4', null, { source: 'none', nics: [], error: null, gpus: [] }), undefined);
  assert.deepEqual([emptyInventory.state, emptyInventory.message], ['nogpu', 'no GPUs']);
});

test('metric values for the heatmap', () => {
  const info = { index: 0, name: 'x', memory_total_mib: 1000, power_limit_w: 400 };
  const sample: GpuSample = [50, 250, 60, 100, 0, 0, 0];
  assert.deepEqual(metricValue(sample, info, 'util'), [0.5, '50% util']);
  assert.deepEqual(metricValue(sample, info, 'memory'), [0.25, '0.2 / 1.0 GiB']);
  assert.deepEqual(metricValue(sample, info, 'temperature'), [0.5, '60 °C']);
  assert.deepEqual(metricValue(sample, info, 'power'), [0.25, '100 / 400 W']);
  assert.deepEqual(metricValue([150, 5000, 120, 900, 0, 0, 0], info, 'util')[0], 1, 'clamped');
  assert.deepEqual(metricValue([0, 0, 10, 0, 0, 0, 0], info, 'temperature')[0], 0, 'clamped');
  const [value, label] = metricValue(undefined, info, 'util');
  assert.ok(isNaN(value));
  assert.equal(label, '');
  assert.ok(isNaN(metricValue(sample, undefined, 'memory')[0]), 'no total: no fraction');
});

test('the heatmap: nodes x GPUs, missing GPUs and hosts without GPUs', () => {
  const hosts = [
    host('w0', h100s(8)),
    host('cpu', { source: 'none', error: 'no GPUs', gpus: [], processes: [] }),
    host('w1', h100s(4))
  ];
  const latest = new Map<string, GpuSample[]>([
    ['w0', Array.from({ length: 8 }, (_, i) => [i * 10, 1000, 50, 300, 0, i === 7 ? 79 : 0, 0])],
    ['w1', [[100, 0, 40, 100, 0, 0, 0]]]
  ]);
  const map = heatmapModel(hosts, latest, 'util');
  assert.deepEqual(map.hosts, ['w0', 'w1']);
  assert.equal(map.columns, 8);
  assert.equal(map.values.length, 16);
  assert.ok(Math.abs(map.values[3] - 0.3) < 1e-6);
  assert.equal(map.values[8], 1);
  assert.ok(isNaN(map.values[9]), 'w1 GPU1: no sample yet');
  assert.ok(isNaN(map.values[15]), 'w1 has no GPU7');
  assert.equal(map.marks[7], 2, 'XID: the dot');
  assert.equal(map.marks[6], 0);
  assert.equal(heatCellText(map, 0, 3), 'w0 GPU3: 30% util');
  assert.equal(heatCellText(map, 0, 7), 'w0 GPU7: 70% util (errors)');
  assert.equal(heatCellText(map, 1, 6), 'w1 GPU6: no data');
  assert.equal(heatCellText(map, 2, 0), null);
  assert.deepEqual(cellAt(map, 25, 5, 10, 10), { row: 0, col: 2 });
  assert.deepEqual(cellAt(map, 79, 19, 10, 10), { row: 1, col: 7 });
  assert.equal(cellAt(map, 80, 5, 10, 10), null);
  assert.equal(cellAt(map, 5, 20, 10, 10), null);
  assert.equal(cellAt(map, -1, 5, 10, 10), null);
  const memory = heatmapModel(hosts, latest, 'memory');
  assert.ok(Math.abs(memory.values[0] - 1000 / 81559) < 1e-6);
  // 64 hosts x 8 GPUs.
  const many = Array.from({ length: 64 }, (_, i) => host(`n${i}`, h100s(8)));
  const samples = new Map(many.map(h => [h.name, Array.from({ length: 8 }, (): GpuSample => [50, 1, 1, 1, 0, 0, 0])]));
  const big = heatmapModel(many, samples, 'util');
  assert.equal(big.hosts.length * big.columns, 512);
  assert.ok(big.values.every(v => v === 0.5));
});

test('heat colours: light for 0, dark for 1, grey for unknown', () => {
  assert.equal(heatColor(0), 'rgb(237,248,251)');
  assert.equal(heatColor(1), 'rgb(63,0,125)');
  assert.equal(heatColor(2), 'rgb(63,0,125)');
  assert.equal(heatColor(NaN), 'rgb(128,128,128)');
  assert.equal(heatColor(0.5), 'rgb(66,146,198)');
});
