import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { PatchOp, PathPart } from '../src/model/messages';
import { applyOps, PatchError, shareUnchanged } from '../src/model/ops';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The server's rule (core/doc_delta.py): keys added, changed or deleted; a list whose length
 * changes is set whole; the ops applied in order give the new document. */
function diff(a: Json, b: Json, path: PathPart[] = [], ops: PatchOp[] = []): PatchOp[] {
  const isObject = (v: Json): v is { [key: string]: Json } =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  if (isObject(a) && isObject(b)) {
    for (const key of Object.keys(a)) {
      if (!(key in b)) {
        ops.push(['del', [...path, key]]);
      }
    }
    for (const key of Object.keys(b)) {
      if (!(key in a)) {
        ops.push(['set', [...path, key], b[key]]);
      } else {
        diff(a[key], b[key], [...path, key], ops);
      }
    }
  } else if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((item, i) => diff(item, b[i], [...path, i], ops));
  } else if (JSON.stringify(a) !== JSON.stringify(b)) {
    ops.push(['set', path, b]);
  }
  return ops;
}

/** A small deterministic PRNG (mulberry32). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STATES = ['starting', 'idle', 'busy', 'dead'];

function makeDoc(rand: () => number, ranks: number): Json {
  return {
    source: 'hostfile',
    hosts: [0, 1, 2].map(i => ({ name: `w${i}`, reachable: rand() > 0.2, live_gpus: null })),
    worlds: [
      {
        id: 'w0-1-1',
        state: 'running',
        cell: rand() > 0.5 ? { first_line: 'train()', started: 't0', ranks: [0, 1] } : null,
        ranks: Array.from({ length: ranks }, (_, r) => ({
          rank: r,
          host: `w${r % 3}`,
          state: STATES[Math.floor(rand() * 4)],
          since: `t${Math.floor(rand() * 5)}`,
          last_output: rand() > 0.5 ? null : 't1'
        }))
      }
    ],
    error: null
  };
}

function mutate(rand: () => number, doc: Json): Json {
  const next = JSON.parse(JSON.stringify(doc));
  const world = next.worlds[0];
  for (let i = 0; i < 5; i++) {
    const pick = rand();
    const rank = world.ranks[Math.floor(rand() * world.ranks.length)];
    if (pick < 0.4 && rank) {
      rank.state = STATES[Math.floor(rand() * 4)];
      rank.since = `t${Math.floor(rand() * 50)}`;
    } else if (pick < 0.5) {
      world.ranks.push({ rank: world.ranks.length, host: 'w9', state: 'starting', since: 'tx' });
    } else if (pick < 0.6 && world.ranks.length > 1) {
      world.ranks.pop();
    } else if (pick < 0.7) {
      world.cell = world.cell ? null : { first_line: 'x = 1', started: 't9', ranks: [0] };
    } else if (pick < 0.8) {
      if ('error' in next) {
        delete next.error;
      } else {
        next.error = 'boom';
      }
    } else if (pick < 0.9) {
      next.hosts[Math.floor(rand() * 3)].live_gpus = { source: 'nvml', gpus: [], processes: [] };
    } else {
      next.worlds.push({ id: `w0-1-${next.worlds.length + 1}`, ranks: [] });
    }
  }
  return next;
}

test('applying the ops of a diff reproduces the target document', () => {
  const rand = random(23);
  let doc = makeDoc(rand, 40);
  for (let round = 0; round < 300; round++) {
    const target = mutate(rand, doc);
    const before = JSON.stringify(doc);
    const patched = applyOps(doc, diff(doc, target));
    assert.deepEqual(patched, target);
    assert.equal(JSON.stringify(doc), before, 'the previous document is left as it was');
    doc = patched;
  }
});

test('parts the ops do not touch keep their objects', () => {
  const doc = makeDoc(random(1), 8) as { worlds: { ranks: Json[] }[]; hosts: Json[] };
  const patched = applyOps(doc, [['set', ['worlds', 0, 'ranks', 3, 'state'], 'busy']]);
  assert.notEqual(patched, doc);
  assert.notEqual(patched.worlds[0].ranks[3], doc.worlds[0].ranks[3]);
  assert.equal(patched.worlds[0].ranks[2], doc.worlds[0].ranks[2]);
  assert.equal(patched.hosts, doc.hosts);
});

test('set, del on keys and list indices, and the whole document', () => {
  const doc = { a: { b: [1, 2, 3] }, c: 1 };
  assert.deepEqual(applyOps(doc, [['set', ['a', 'b', 1], 20]]), { a: { b: [1, 20, 3] }, c: 1 });
  assert.deepEqual(applyOps(doc, [['del', ['a', 'b', 0]]]), { a: { b: [2, 3] }, c: 1 });
  assert.deepEqual(applyOps(doc, [['del', ['c']]]), { a: { b: [1, 2, 3] } });
  assert.deepEqual(applyOps(doc, [['set', ['d'], { e: null }]]), { a: { b: [1, 2, 3] }, c: 1, d: { e: null } });
  assert.deepEqual(applyOps(doc, [['set', [], { z: 1 }]]), { z: 1 });
  // Several ops on one container in one batch: copied once, changed in place after.
  assert.deepEqual(
    applyOps(doc, [
      ['set', ['a', 'b', 0], 9],
      ['set', ['a', 'b', 2], 7],
      ['set', ['c'], 2]
    ]),
    { a: { b: [9, 2, 7] }, c: 2 }
  );
  assert.deepEqual(doc, { a: { b: [1, 2, 3] }, c: 1 });
});

test('an op that does not fit the document is a PatchError', () => {
  const doc = { a: { b: [1, 2, 3] } };
  const bad: PatchOp[][] = [
    [['set', ['x', 'y'], 1]], // through a missing key
    [['set', ['a', 'b', 7], 1]], // past the end of a list
    [['set', ['a', 'b', 'k'], 1]], // a key into a list
    [['set', ['a', 0], 1]], // an index into an object
    [['del', ['a', 'zz']]], // nothing to delete
    [['del', ['a', 'b', 3]]],
    [['del', []]],
    [['set', ['a', 'b', 0, 'c'], 1]], // through a number
    [['frob', ['a'], 1] as unknown as PatchOp]
  ];
  for (const ops of bad) {
    assert.throws(() => applyOps(doc, ops), PatchError, JSON.stringify(ops));
  }
});

test('shareUnchanged keeps the previous objects of equal parts', () => {
  const prev = { hosts: [{ name: 'a', x: [1] }, { name: 'b' }], worlds: [{ id: 'w', ranks: [{ rank: 0 }] }] };
  const next = JSON.parse(JSON.stringify(prev));
  assert.equal(shareUnchanged(prev, next), prev);
  next.worlds[0].ranks.push({ rank: 1 });
  const shared = shareUnchanged(prev, next);
  assert.deepEqual(shared, next);
  assert.equal(shared.hosts, prev.hosts);
  assert.notEqual(shared.worlds, prev.worlds);
  assert.equal(shared.worlds[0].ranks[0], prev.worlds[0].ranks[0]);
  const fewer = { hosts: [{ name: 'a', x: [1] }] };
  assert.deepEqual(shareUnchanged(prev, fewer), fewer);
  assert.equal(shareUnchanged(null, next), next);
});
