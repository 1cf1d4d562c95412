import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { IHostStatus, IRank, IWorld } from '../src/model/documents';
import {
  ageSeconds,
  foldRanks,
  formatAge,
  interruptText,
  rankList,
  shortAge,
  unblockText,
  unfoldRanks
} from '../src/model/format';
import { healthOf, hostRow, rankStatesOf } from '../src/model/hosts';
import { hostGroups, rankRows, rankText } from '../src/model/ranks';
import {
  cellLine,
  lastProfile,
  highlightedRanks,
  LATE_AFTER_S,
  orphaned,
  SILENT_FACTOR,
  SILENT_MIN_S,
  snippetFor,
  stragglers,
  summaryLine,
  worldKey,
  worldTitle
} from '../src/model/worlds';

const NOW = Date.parse('2026-11-25T10:00:00.000+00:00');

/** The ISO time `seconds` before NOW, as the server writes it. */
function ago(seconds: number): string {
  return new Date(NOW - seconds * 1000).toISOString().replace('Z', '+00:00');
}

function rank(r: number, state: string, sinceS: number | null, extra: Partial<IRank> = {}): IRank {
  return { rank: r, host: `w${Math.floor(r / 8)}`, state, since: sinceS === null ? null : ago(sinceS), last_output: null, ...extra };
}

function world(ranks: IRank[], extra: Partial<IWorld> = {}): IWorld {
  return { id: 'worker0-4766-1', pid: 4766, state: 'running', np: ranks.length, ranks, ...extra };
}

test('ranks fold into ranges', () => {
  assert.equal(foldRanks([]), '');
  assert.equal(foldRanks([3]), '3');
  assert.equal(foldRanks([5, 0, 1, 2, 3, 3]), '0-3,5');
  assert.equal(foldRanks([17, 301]), '17,301');
  assert.equal(foldRanks([0, 2, 4, 5, 6, 9]), '0,2,4-6,9');
});

test('folded rank sets unfold', () => {
  assert.deepEqual(unfoldRanks('0-3,5'), [0, 1, 2, 3, 5]);
  assert.deepEqual(unfoldRanks(''), []);
  assert.deepEqual(unfoldRanks('7'), [7]);
  assert.deepEqual(unfoldRanks(foldRanks([1, 2, 9, 300, 301])), [1, 2, 9, 300, 301]);
});

test("the Interrupt button reads the server's answer: ranks folded, or a list", () => {
  // mlp_magic/server/actions.interrupt answers {"world", "signalled": "0-3", "problems": {}}
  assert.equal(interruptText({ world: 'w-1-0', signalled: '0-3', problems: {} }), 'Interrupt sent to ranks 0-3.');
  assert.equal(interruptText({ signalled: '2', problems: {} }), 'Interrupt sent to rank 2.');
  assert.equal(interruptText({ signalled: '', problems: {} }), 'No rank was running anything to interrupt.');
  assert.equal(interruptText({ signalled: [0, 1] }), 'Interrupt sent to ranks 0-1.');
  assert.equal(
    interruptText({ signalled: '0-7', problems: { w1: 'timed out' } }),
    'Interrupt sent to ranks 0-7. Not reached: w1 (timed out).'
  );
  assert.equal(interruptText({ message: 'done' }), 'done');
  assert.equal(interruptText({}), 'Interrupt sent.');
  assert.equal(interruptText(null), 'Interrupt sent.');
  assert.equal(
    unblockText({ signalled: '0-2', problems: {} }),
    'Unblock sent to ranks 0-2. Their hung collectives fail, every process keeps its state; the next ' +
      '%%mpirun cell makes the default process group, or the MPI communicator, again.'
  );
  assert.equal(
    unblockText({ signalled: '0,2-3', progressed: '1', problems: {} }),
    'Unblock sent to ranks 0,2-3. Their hung collectives fail, every process keeps its state; the next ' +
      "%%mpirun cell makes the default process group, or the MPI communicator, again. Some were still busy a " +
      "second later: the progress signal went to the idle rank 1, for a revoked MPI call to end."
  );
  assert.equal(unblockText({ signalled: '', problems: {} }), 'No rank was busy: nothing to unblock.');
  assert.equal(
    unblockText({ signalled: '', problems: { w1: 'no agent' } }),
    'No rank was busy: nothing to unblock. Not reached: w1 (no agent).'
  );
});

test('rank lists stop after six ranges and count the rest', () => {
  assert.equal(rankList([2]), 'rank 2');
  assert.equal(rankList([17, 301]), 'ranks 17,301');
  assert.equal(rankList([0, 1, 2, 3]), 'ranks 0-3');
  const odd = Array.from({ length: 46 }, (_, i) => 2 * i + 1);
  assert.equal(rankList(odd), 'ranks 1,3,5,7,9,11 +40');
  // The count after "+" is ranks, not ranges.
  assert.equal(rankList([0, 2, 4, 6, 8, 10, 20, 21, 22, 30]), 'ranks 0,2,4,6,8,10 +4');
  assert.equal(rankList([0, 2, 4], 2), 'ranks 0,2 +1');
});

test('ages read like a person would say them', () => {
  const cases: [number, string][] = [
    [0, '0 s'],
    [0.9, '0 s'],
    [43.7, '43 s'],
    [59, '59 s'],
    [60, '1 min'],
    [95, '1 min 35 s'],
    [120, '2 min'],
    [599, '9 min 59 s'],
    [600, '10 min'],
    [1500, '25 min'],
    [3600, '1 h 00 min'],
    [7300, '2 h 01 min'],
    [3 * 86400 + 5, '3 d'],
    [-5, '0 s']
  ];
  for (const [seconds, text] of cases) {
    assert.equal(formatAge(seconds), text, `${seconds}`);
  }
  assert.equal(ageSeconds(ago(12), NOW), 12);
  assert.equal(ageSeconds(ago(-3), NOW), 0, 'a time after now (clock skew) is no age');
  assert.equal(ageSeconds(null, NOW), null);
  assert.equal(ageSeconds('not a time', NOW), null);
});

test('summary: 512 ranks, most busy, two idle named', () => {
  const ranks = Array.from({ length: 512 }, (_, r) =>
    r === 17 || r === 301 ? rank(r, 'idle', 3) : rank(r, 'busy', 43)
  );
  assert.equal(summaryLine(world(ranks), NOW), '512 ranks: 510 busy 43 s, 2 idle (ranks 17,301)');
});

test('summary: the majority age is the median of its ranks', () => {
  const ranks = [rank(0, 'busy', 40), rank(1, 'busy', 43), rank(2, 'busy', 300), rank(3, 'idle', 1)];
  assert.equal(summaryLine(world(ranks), NOW), '4 ranks: 3 busy 43 s, 1 idle (rank 3)');
});

test('summary: ties name every tied group', () => {
  const ranks = [rank(0, 'busy', 5), rank(1, 'busy', 5), rank(2, 'idle', 1), rank(3, 'idle', 1)];
  assert.equal(summaryLine(world(ranks), NOW), '4 ranks: 2 busy 5 s (ranks 0-1), 2 idle (ranks 2-3)');
  const three = [rank(0, 'dead', 5), rank(1, 'idle', 5), rank(2, 'busy', 9)];
  assert.equal(summaryLine(world(three), NOW), '3 ranks: 1 busy 9 s (rank 2), 1 idle (rank 1), 1 dead (rank 0)');
});

test('summary: all idle, all busy, dead ranks, one rank, none', () => {
  const idle = [0, 1, 2, 3].map(r => rank(r, 'idle', 120));
  assert.equal(summaryLine(world(idle), NOW), '4 ranks: 4 idle 2 min');
  const busy = [0, 1, 2, 3].map(r => rank(r, 'busy', 7));
  assert.equal(summaryLine(world(busy), NOW), '4 ranks: 4 busy 7 s');
  const dead = [rank(0, 'busy', 10), rank(1, 'busy', 10), rank(2, 'dead', 4), rank(3, 'busy', 10)];
  assert.equal(summaryLine(world(dead), NOW), '4 ranks: 3 busy 10 s, 1 dead (rank 2)');
  assert.equal(summaryLine(world([rank(0, 'busy', 3)]), NOW), '1 rank: busy 3 s');
  assert.equal(summaryLine(world([]), NOW), 'no ranks');
  assert.equal(summaryLine(world([], { state: 'starting' }), NOW), 'starting, no rank yet');
  const starting = [0, 1, 2].map(r => rank(r, 'starting', 2));
  assert.equal(summaryLine(world(starting), NOW), '3 ranks: 3 starting 2 s');
});

test('summary: ranks without since (older servers) have no age', () => {
  const ranks = [
    { rank: 0, host: 'localhost', engine_id: 0, state: 'idle' },
    { rank: 1, host: 'localhost', engine_id: 1, state: 'busy' },
    { rank: 2, host: '127.0.0.2', engine_id: 2, state: 'idle' }
  ];
  assert.equal(summaryLine({ pid: 1, ranks }, NOW), '3 ranks: 2 idle, 1 busy (rank 1)');
  assert.equal(summaryLine({ pid: 1, ranks: [{ rank: 0, host: 'h', state: null }] }, NOW), '1 rank: unknown');
});

test('summary: many minority ranks are listed up to six ranges then counted', () => {
  const ranks = Array.from({ length: 512 }, (_, r) => (r % 10 === 0 ? rank(r, 'idle', 2) : rank(r, 'busy', 30)));
  assert.equal(
    summaryLine(world(ranks), NOW),
    '512 ranks: 460 busy 30 s, 52 idle (ranks 0,10,20,30,40,50 +46)'
  );
});

test('stragglers: busy long after most finished', () => {
  const ranks = Array.from({ length: 8 }, (_, r) => (r === 5 ? rank(r, 'busy', 60) : rank(r, 'idle', 12)));
  assert.deepEqual(stragglers(world(ranks), NOW), [{ rank: 5, reason: 'still busy 12 s after most finished' }]);
  // Just finished: not yet.
  const fresh = Array.from({ length: 8 }, (_, r) => (r === 5 ? rank(r, 'busy', 60) : rank(r, 'idle', LATE_AFTER_S - 1)));
  assert.deepEqual(stragglers(world(fresh), NOW), []);
  // Half and half: no "most".
  const half = [rank(0, 'busy', 60), rank(1, 'busy', 60), rank(2, 'idle', 30), rank(3, 'idle', 30)];
  assert.deepEqual(stragglers(world(half), NOW), []);
});

test('stragglers: silent much longer than the others while all are busy', () => {
  const ranks = Array.from({ length: 8 }, (_, r) =>
    rank(r, 'busy', 120, { last_output: r === 3 ? ago(90) : ago(2) })
  );
  assert.deepEqual(stragglers(world(ranks), NOW), [
    { rank: 3, reason: 'silent 1 min 30 s while the others wrote 2 s ago' }
  ]);
  // A rank that never wrote in this state counts from when it became busy.
  const never = Array.from({ length: 4 }, (_, r) =>
    rank(r, 'busy', 60, { last_output: r === 0 ? ago(500) : ago(1) })
  );
  assert.deepEqual(stragglers(world(never), NOW).map(s => s.rank), [0]);
  // Everybody quiet alike: nobody stands out.
  const quiet = Array.from({ length: 4 }, (_, r) => rank(r, 'busy', 60 + r));
  assert.deepEqual(stragglers(world(quiet), NOW), []);
  // Silent, but not SILENT_MIN_S yet.
  const short = Array.from({ length: 4 }, (_, r) =>
    rank(r, 'busy', 60, { last_output: r === 0 ? ago(SILENT_MIN_S - 1) : ago(0.5) })
  );
  assert.deepEqual(stragglers(world(short), NOW), []);
  // Longer than SILENT_MIN_S, but not SILENT_FACTOR times the others' (who print every 10 s).
  const slow = Array.from({ length: 4 }, (_, r) =>
    rank(r, 'busy', 120, { last_output: r === 0 ? ago(SILENT_FACTOR * 6 - 1) : ago(6) })
  );
  assert.deepEqual(stragglers(world(slow), NOW), []);
  slow[0] = rank(0, 'busy', 120, { last_output: ago(SILENT_FACTOR * 6 + 1) });
  assert.deepEqual(stragglers(world(slow), NOW).map(s => s.rank), [0]);
});

test('stragglers: none when idle, dead or alone; only the cell\'s ranks count', () => {
  assert.deepEqual(stragglers(world([0, 1, 2].map(r => rank(r, 'idle', 50))), NOW), []);
  assert.deepEqual(stragglers(world([rank(0, 'busy', 50)]), NOW), []);
  const dead = [rank(0, 'dead', 50), rank(1, 'idle', 50), rank(2, 'idle', 50)];
  assert.deepEqual(stragglers(world(dead), NOW), []);
  // The cell runs on ranks 0-1; ranks 2-7 idle do not make rank 1 late.
  const ranks = Array.from({ length: 8 }, (_, r) => (r < 2 ? rank(r, 'busy', 60) : rank(r, 'idle', 600)));
  const cell = { first_line: 'f()', started: ago(60), ranks: [0, 1] };
  assert.deepEqual(stragglers(world(ranks, { cell }), NOW), []);
  assert.equal(stragglers(world(ranks), NOW).length, 2);
});

test('ranks grouped by host, hosts in the order of their first rank', () => {
  const ranks: IRank[] = [
    { rank: 2, host: 'b', state: 'busy', since: ago(5) },
    { rank: 0, host: 'a', state: 'idle', since: ago(5) },
    { rank: 1, host: 'b', state: 'busy', since: ago(5) },
    { rank: 3, host: 'a', state: 'busy', since: ago(5) }
  ];
  const groups = hostGroups(ranks);
  assert.deepEqual(groups.map(g => g.host), ['a', 'b']);
  assert.deepEqual(groups[0].ranks.map(r => r.rank), [0, 3]);
  assert.equal(groups[0].label, 'a: ranks 0,3 · 1 busy, 1 idle');
  assert.equal(groups[1].label, 'b: ranks 1-2 · 2 busy');
  assert.deepEqual(rankRows(ranks).map(r => r.key), ['h:a', 'r:0', 'r:3', 'h:b', 'r:1', 'r:2']);
  // 512 ranks on 64 hosts: 576 rows.
  const many = Array.from({ length: 512 }, (_, r) => rank(r, 'busy', 3));
  assert.equal(rankRows(many).length, 512 + 64);
});

test('a rank row: state, since, last output', () => {
  assert.deepEqual(rankText(rank(4, 'busy', 43, { last_output: ago(2) }), NOW), {
    state: 'busy',
    since: '43s',
    output: 'out 2s',
    title: 'rank 4 on w0: busy for 43 s, last output 2 s ago'
  });
  assert.deepEqual(rankText({ rank: 0, host: 'h', state: 'idle' }, NOW), {
    state: 'idle',
    since: '',
    output: 'no output',
    title: 'rank 0 on h: idle, no output in this World'
  });
  assert.equal(rankText(rank(4, 'busy', 95, { last_output: ago(7300) }), NOW).output, 'out 2h01');
});

test('compact ages for rows', () => {
  const cases: [number, string][] = [
    [0, '0s'], [43.7, '43s'], [60, '1m00'], [95, '1m35'], [600, '10m'], [3599, '59m'],
    [3600, '1h00'], [7300, '2h01'], [3 * 86400, '3d'], [-1, '0s']
  ];
  for (const [seconds, text] of cases) {
    assert.equal(shortAge(seconds), text, `${seconds}`);
  }
});

test('the running cell: first line, elapsed, and its ranks when not all', () => {
  const ranks = [0, 1, 2, 3].map(r => rank(r, 'busy', 43));
  assert.equal(cellLine(world(ranks), NOW), null);
  const cell = { first_line: 'model.train()', started: ago(43), ranks: [0, 1, 2, 3] };
  assert.deepEqual(cellLine(world(ranks, { cell }), NOW), { firstLine: 'model.train()', elapsed: '43 s', on: '' });
  const some = { first_line: '', started: ago(61), ranks: [1, 2] };
  assert.deepEqual(cellLine(world(ranks, { cell: some }), NOW), { firstLine: '(empty cell)', elapsed: '1 min 1 s', on: 'ranks 1-2' });
});

test('the last profile: when, the straggler, its lines and where its samples are', () => {
  const ranks = [0, 1].map(r => rank(r, 'idle', 5));
  assert.equal(lastProfile(world(ranks), NOW), null);
  const profile = { at: ago(130), lines: ['profile of ranks 0-1 at 100 Hz over 2.0 s:', 'rank 1 entered last'], straggler: 1, folder: '/l/p' };
  assert.deepEqual(lastProfile(world(ranks, { profile }), NOW), {
    title: 'last profile (2 min 10 s ago): straggler: rank 1',
    text: 'profile of ranks 0-1 at 100 Hz over 2.0 s:\nrank 1 entered last\nthe samples: /l/p'
  });
  assert.equal(lastProfile(world(ranks, { profile: { ...profile, straggler: null } }), NOW)?.title,
    'last profile (2 min 10 s ago): no straggler named');
});

test('snippets for the highlighted ranks', () => {
  assert.equal(snippetFor([301, 17]), '%mpirun --ranks 17,301 --where');
  assert.equal(snippetFor([0, 1, 2, 5]), '%mpirun --ranks 0-2,5 --where');
  assert.equal(snippetFor([]), '%mpirun --stacks');
  const ranks = Array.from({ length: 8 }, (_, r) => (r === 5 || r === 6 ? rank(r, 'idle', 3) : rank(r, 'busy', 30)));
  const w = world(ranks);
  assert.deepEqual(highlightedRanks(w, [3, 1], [], NOW), [1, 3], 'the selection first');
  assert.deepEqual(highlightedRanks(w, [], [{ rank: 4, reason: '' }], NOW), [4], 'then stragglers');
  assert.deepEqual(highlightedRanks(w, [], [], NOW), [5, 6], 'then the minority');
  const tie = world([rank(0, 'busy', 1), rank(1, 'idle', 1)]);
  assert.deepEqual(highlightedRanks(tie, [], [], NOW), []);
  assert.equal(snippetFor(highlightedRanks(w, [], [], NOW)), '%mpirun --ranks 5-6 --where');
});

test('World key and title, with and without an id', () => {
  assert.equal(worldKey({ id: 'h-1-2', pid: 1 }), 'h-1-2');
  assert.equal(worldKey({ pid: 4766 }), '4766');
  assert.equal(worldTitle(world([rank(0, 'idle', 1)], { mpi: 'openmpi' })), 'World worker0-4766-1 · 1 rank · openmpi · running');
  assert.equal(worldTitle({ pid: 7, np: 4 }), 'World of kernel 7 · 4 ranks');
  assert.equal(worldTitle({ pid: 7, np: 2, kept: true, kernel: 'alive' }), 'World of kernel 7 · 2 ranks · kept');
  const left = { pid: 7, np: 2, kept: true, kernel: 'gone', keep_hours: 0.5 };
  assert.equal(worldTitle(left), 'World of kernel 7 · 2 ranks · kept, no kernel (stops 30 min after it left)');
  assert.ok(orphaned(left) && !orphaned({ pid: 7, kernel: 'alive' }) && !orphaned({ pid: 7 }));
});

test('a host row of the table', () => {
  const host: IHostStatus = {
    name: 'w1', slots: 4, index: 1, ranks: [4, 5, 6, 7], reachable: false, probe_ms: null,
    error: 'connection refused', gpus: null, hints: [], live_gpus: null, health: null,
    engines: [
      { rank: 4, engine_id: 4, state: 'idle', world_pid: 1 },
      { rank: 5, engine_id: 5, state: 'busy', world_pid: 1 },
      { rank: 6, engine_id: 6, state: 'idle', world_pid: 1 }
    ]
  };
  assert.deepEqual(hostRow(host), {
    name: 'w1', slots: 4, ranks: '4-7', reachable: 'no', reachableDetail: 'connection refused',
    engines: '2 idle\n1 busy', health: 'unknown', healthDetail: 'not checked: run mlp-magic doctor'
  });
  assert.equal(hostRow({ ...host, reachable: true, probe_ms: 3.4 }).reachableDetail, 'reachable (3 ms)');
  assert.equal(hostRow({ ...host, reachable: null }).reachable, 'unknown');
});

test("a host row's health is the last doctor run's worst finding there", () => {
  const host: IHostStatus = {
    name: 'w2', slots: 1, index: 2, ranks: [2], reachable: true, probe_ms: null, error: null, gpus: null,
    hints: [], engines: [], live_gpus: null, health: { state: 'error', findings: ['numpy', 'NCCL_IB_DISABLE'], checked_at: null }
  };
  assert.deepEqual(healthOf(host), { health: 'error', healthDetail: 'error: numpy, NCCL_IB_DISABLE' });
  assert.equal(hostRow({ ...host, health: { state: 'ok', findings: [], checked_at: null } }).healthDetail, 'no finding');
  assert.equal(hostRow({ ...host, health: { state: 'bogus', findings: [], checked_at: null } }).health, 'unknown');
  assert.equal(hostRow({ ...host, health: null }).health, 'unknown');
});

test("a host row's engines take their states from their World's ranks", () => {
  const host: IHostStatus = {
    name: 'w0', slots: 2, index: 0, ranks: [0, 1], reachable: true, probe_ms: null,
    error: null, gpus: null, hints: [], live_gpus: null, health: null,
    engines: [
      { rank: 0, engine_id: 0, state: null, world_pid: 7 },
      { rank: 1, engine_id: 1, state: null, world_pid: 7 },
      { rank: 1, engine_id: 1, state: null, world_pid: 8 }
    ]
  };
  const states = rankStatesOf([
    { pid: 7, ranks: [{ rank: 0, host: 'w0', state: 'idle' }, { rank: 1, host: 'w0', state: 'busy' }] },
    { pid: 9, ranks: [{ rank: 1, host: 'w0', state: 'dead' }] }
  ]);
  assert.equal(hostRow(host, states).engines, '1 idle\n1 busy\n1 unknown');
  assert.equal(hostRow(host).engines, '3 unknown');
});
