import { test } from 'node:test';
import assert from 'node:assert/strict';

import { hostRow, rankStatesOf, updatedText } from '../src/model/hosts';
import { interruptText } from '../src/model/format';
import { ECC, hostGpuView, MEM, POWER, TEMP, THROTTLE, UTIL, XID } from '../src/model/gpus';
import { sparkPoints } from '../src/model/gpuhistory';
import { heatCellText, heatmapModel } from '../src/model/heatmap';
import { hostGroups, rankRows, rankText } from '../src/model/ranks';
import { LiveStore } from '../src/model/store';
import {
  cellLine,
  highlightedRanks,
  snippetFor,
  stragglers,
  summaryLine,
  worldKey,
  worldTitle
} from '../src/model/worlds';
import {
  cluster,
  clusterError,
  gpuHistory,
  gpus,
  historyExport,
  interruptAnswer,
  patch,
  restartAnswer,
  snapshot,
  stacksErrorAnswer
} from './samples';

// The samples' clock (tests/unit/test_panel_samples.py NOW): the server's time at the snapshot.
const NOW = Date.parse('2026-11-25T10:00:00.000+00:00');

function storeAfter(...messages: Parameters<LiveStore['receive']>[0][]): LiveStore {
  const store = new LiveStore();
  for (const message of messages) {
    assert.notEqual(store.receive(message, NOW), 'gap', message.type);
  }
  return store;
}

test("the snapshot sample: the World's summary, cell, ranks by host and snippet", () => {
  const store = storeAfter(snapshot);
  assert.equal(store.offsetMs, 0);
  const world = store.doc!.worlds[0];
  assert.equal(worldKey(world), 'worker0-4766-1');
  assert.equal(worldTitle(world), 'World worker0-4766-1 · 4 ranks · openmpi · running');
  assert.equal(summaryLine(world, NOW), '4 ranks: 2 busy 2 min, 1 idle (rank 2), 1 dead (rank 3)');
  assert.deepEqual(cellLine(world, NOW), { firstLine: 'for step in range(steps):', elapsed: '2 min', on: '' });
  assert.deepEqual(rankRows(world.ranks!).map(row => row.key), ['h:worker0', 'r:0', 'r:1', 'h:worker1', 'r:2', 'r:3']);
  assert.deepEqual(hostGroups(world.ranks!).map(group => group.label), [
    'worker0: ranks 0-1 · 2 busy',
    'worker1: ranks 2-3 · 1 idle, 1 dead'
  ]);
  assert.deepEqual(rankText(world.ranks![0], NOW), {
    state: 'busy', since: '2m00', output: 'out 2s',
    title: 'rank 0 on worker0: busy for 2 min, last output 2 s ago'
  });
  assert.deepEqual(stragglers(world, NOW), []);
  assert.equal(snippetFor(highlightedRanks(world, [], [], NOW)), '%mpirun --ranks 2-3 --where');
});

test('the patch sample applied to the snapshot sample is the cluster sample, unchanged parts shared', () => {
  const store = storeAfter(snapshot);
  const before = store.doc!;
  assert.equal(store.receive(patch, NOW + 5000), 'doc');
  assert.deepEqual(store.doc, cluster);
  assert.notEqual(store.doc!.worlds[0], before.worlds[0]);
  assert.equal(store.doc!.worlds[0].ranks![2], before.worlds[0].ranks![2]);
  assert.equal(store.doc!.hosts[0].gpus, before.hosts[0].gpus);
  assert.equal(summaryLine(store.doc!.worlds[0], NOW + 5000), '4 ranks: 3 idle 1 s, 1 dead (rank 3)');
});

test('the cluster sample: the host table', () => {
  const states = rankStatesOf(cluster.worlds);
  const [worker0, worker1] = cluster.hosts.map(host => hostRow(host, states));
  assert.deepEqual(
    [worker0.name, worker0.slots, worker0.ranks, worker0.reachableDetail, worker0.engines, worker0.health],
    ['worker0', 2, '0-1', 'reachable (0 ms)', '2 idle', 'ok']
  );
  assert.deepEqual(
    [worker1.ranks, worker1.reachableDetail, worker1.engines, worker1.health],
    ['2-3', 'reachable (2 ms)', '1 idle\n1 dead', 'error']
  );
  assert.match(worker1.healthDetail, /^error: XID error, \/dev\/shm \(doctor at .+\)$/);
  // Python's ISO times are times to the panel (else it shows them as they came).
  assert.notEqual(updatedText(cluster), `updated ${cluster.updated_at}`);
});

test('the cluster sample when no topology can be read: its reason, no host', () => {
  const store = new LiveStore();
  store.setPolled(clusterError, null, NOW);
  assert.deepEqual(store.doc!.hosts, []);
  assert.equal(store.doc!.source, null);
  assert.match(store.doc!.error!, /hostfile/);
  assert.notEqual(updatedText(clusterError), `updated ${clusterError.updated_at}`);
});

test('the gpus and gpu_history samples: GPU rows, throttling, processes, heatmap, sparklines', () => {
  const store = storeAfter(snapshot, gpuHistory, gpus);
  const doc = store.doc!;
  const worker1 = hostGpuView(doc.hosts[1], store.history.latest.get('worker1'));
  assert.equal(worker1.state, 'live');
  assert.equal(worker1.models, '1 × NVIDIA H100 80GB HBM3');
  assert.equal(worker1.gpus[0].utilText, '99% util');
  assert.deepEqual(worker1.gpus[0].throttle, { reasons: ['SW power cap'], slowing: true });
  assert.deepEqual(worker1.gpus[0].processes.map(p => p.text), ['rank 2: 4.9 GiB']);
  const worker0 = hostGpuView(doc.hosts[0], store.history.latest.get('worker0'));
  assert.deepEqual(worker0.gpus.map(g => g.utilText), ['100% util', '0% util', '0% util', '0% util']);
  const map = heatmapModel(doc.hosts, store.history.latest, 'util');
  assert.deepEqual([map.hosts, map.columns], [['worker0', 'worker1'], 4]);
  assert.equal(heatCellText(map, 0, 0), 'worker0 GPU0: 100% util');
  assert.equal(heatCellText(map, 1, 1), 'worker1 GPU1: no data');
  // The history's buckets, then the newest sample: a sparkline over the last ten minutes.
  const series = store.history.seriesOf('worker0', 0);
  assert.equal(series.t.last(), gpus.t);
  const points = sparkPoints(series.t, series.util, gpus.t, 600, 100, 120, 22).filter(p => p !== null);
  assert.equal(points.length, 4);
  assert.deepEqual(points[points.length - 1], [120, 0]);
});

test("the GPU history export: a sample's positions are the panel's, its newest the gpus message's", () => {
  const positions = [UTIL, MEM, TEMP, POWER, THROTTLE, XID, ECC];
  for (const metrics of [historyExport.metrics, ...Object.values(historyExport.hosts).map(h => h.metrics)]) {
    assert.deepEqual(positions.map(i => metrics[i]), [
      'util_pct', 'mem_used_mib', 'temp_c', 'power_w', 'throttle_bits', 'xid', 'ecc_uncorrected'
    ]);
  }
  assert.deepEqual(Object.keys(historyExport.hosts), Object.keys(gpus.hosts));
  for (const [host, history] of Object.entries(historyExport.hosts)) {
    assert.deepEqual(history.samples[history.samples.length - 1], [gpus.t, gpus.hosts[host]]);
    assert.equal(history.gpus, cluster.hosts.find(h => h.name === host)!.live_gpus!.gpus.length);
  }
});

test('the action answers: what the panel says of them', () => {
  const reason = (host: string) => `no agent on ${host} for this World (it started without one)`;
  assert.equal(
    interruptText(interruptAnswer),
    `No rank was running anything to interrupt. Not reached: worker0 (${reason('worker0')}), worker1 (${reason('worker1')}).`
  );
  assert.equal(restartAnswer.world, worldKey(cluster.worlds[0]));
  assert.deepEqual([restartAnswer.stopped, restartAnswer.processes], [true, 1]);
  // No tree: the answer says why (the panel shows "(no stacks)" for it today).
  assert.deepEqual([stacksErrorAnswer.html, stacksErrorAnswer.text], [undefined, undefined]);
  assert.match(stacksErrorAnswer.error!, /empty host list/);
});
