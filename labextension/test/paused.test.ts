/**
 * Ranks stopped at a breakpoint (`"state": "paused"`, world/pure/rank_states.py): typed, ordered
 * right after busy, counted in the summary line, styled apart in the rank rows, never stragglers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import type { IRank, IWorld, RankState } from '../src/model/documents';
import { hostGroups, rankText, STATE_ORDER, stateGroups, stateHint } from '../src/model/ranks';
import { highlightedRanks, stragglers, summaryLine } from '../src/model/worlds';

const NOW = Date.parse('2026-11-25T10:00:00.000+00:00');

function ago(seconds: number): string {
  return new Date(NOW - seconds * 1000).toISOString().replace('Z', '+00:00');
}

function rank(r: number, state: RankState, sinceS: number, extra: Partial<IRank> = {}): IRank {
  return { rank: r, host: `w${Math.floor(r / 8)}`, state, since: ago(sinceS), last_output: null, ...extra };
}

function world(ranks: IRank[]): IWorld {
  return { id: 'worker0-4766-1', pid: 4766, state: 'running', np: ranks.length, ranks };
}

test('every rank state has its place in the order: paused right after busy', () => {
  assert.deepEqual([...STATE_ORDER], ['busy', 'paused', 'idle', 'starting', 'dead']);
  const tied = [rank(0, 'dead', 1), rank(1, 'idle', 1), rank(2, 'paused', 1), rank(3, 'starting', 1), rank(4, 'busy', 1)];
  assert.deepEqual(stateGroups(tied, NOW).map(g => g.state), ['busy', 'paused', 'idle', 'starting', 'dead']);
});

test('summary: paused ranks are counted, with their age when most are paused', () => {
  const paused = [0, 1, 2, 3].map(r => rank(r, 'paused', 12));
  assert.equal(summaryLine(world(paused), NOW), '4 ranks: 4 paused 12 s');
  assert.equal(summaryLine(world([rank(0, 'paused', 3)]), NOW), '1 rank: paused 3 s');
  const late = [rank(0, 'paused', 12), rank(1, 'paused', 12), rank(2, 'paused', 12), rank(3, 'busy', 20)];
  assert.equal(summaryLine(world(late), NOW), '4 ranks: 3 paused 12 s, 1 busy (rank 3)');
  const withIdle = [rank(0, 'idle', 30), rank(1, 'idle', 30), rank(2, 'paused', 12), rank(3, 'paused', 12)];
  assert.equal(summaryLine(world(withIdle), NOW), '4 ranks: 2 paused 12 s (ranks 2-3), 2 idle (ranks 0-1)');
  const withBusy = [rank(0, 'paused', 12), rank(1, 'busy', 5)];
  assert.equal(summaryLine(world(withBusy), NOW), '2 ranks: 1 busy 5 s (rank 1), 1 paused (rank 0)');
});

test('stragglers: a paused rank waits for the user, it is never late', () => {
  // Stopped at a breakpoint long after the others finished: not a straggler.
  const afterIdle = Array.from({ length: 8 }, (_, r) => (r >= 6 ? rank(r, 'paused', 50) : rank(r, 'idle', 60)));
  assert.deepEqual(stragglers(world(afterIdle), NOW), []);
  // Every rank paused for long, silent since: none.
  const allPaused = Array.from({ length: 8 }, (_, r) => rank(r, 'paused', 600, { last_output: ago(590) }));
  assert.deepEqual(stragglers(world(allPaused), NOW), []);
  // Paused and silent among ranks that print: the busy ones are looked at, the paused ones never.
  const amongBusy = Array.from({ length: 8 }, (_, r) =>
    r < 3 ? rank(r, 'paused', 300) : rank(r, 'busy', 400, { last_output: ago(1) })
  );
  assert.deepEqual(stragglers(world(amongBusy), NOW), []);
  // Paused ranks did not finish: two busy ranks among six paused are not "late after most finished".
  const notFinished = Array.from({ length: 8 }, (_, r) => (r < 6 ? rank(r, 'paused', 30) : rank(r, 'busy', 60)));
  assert.deepEqual(stragglers(world(notFinished), NOW), []);
  // A busy rank late after most finished still is one, beside a paused one.
  const mixed = Array.from({ length: 8 }, (_, r) =>
    r === 6 ? rank(r, 'paused', 40) : r === 7 ? rank(r, 'busy', 60) : rank(r, 'idle', 12)
  );
  assert.deepEqual(stragglers(world(mixed), NOW), [{ rank: 7, reason: 'still busy 12 s after most finished' }]);
  // Not stragglers, so the snippet is for the busy ranks that have not reached the breakpoint.
  assert.deepEqual(highlightedRanks(world(notFinished), [], stragglers(world(notFinished), NOW), NOW), [6, 7]);
});

test('a paused rank row: its state, its age, and on hover what moves it on', () => {
  const text = rankText(rank(2, 'paused', 12), NOW);
  assert.equal(text.state, 'paused');
  assert.equal(text.since, '12s');
  assert.equal(text.title, 'rank 2 on w0: paused for 12 s, no output in this World');
  assert.match(stateHint('paused'), /breakpoint.*%mpirun --pdb c.*%mpirun --pdb q/);
  for (const state of ['busy', 'idle', 'starting', 'dead', 'unknown']) {
    assert.equal(stateHint(state), '', state);
  }
  const ranks: IRank[] = [0, 1, 2, 3].map(r => ({ rank: r, host: 'a', state: r < 2 ? 'idle' : 'paused', since: ago(5) }));
  assert.equal(hostGroups(ranks)[0].label, 'a: ranks 0-3 · 2 paused, 2 idle');
});

/** The declarations of the `.jp-MlpLive-rank[data-state='<state>'] ...` rules of style/base.css. */
function stateStyle(state: string): string {
  // Run from test-build/test/: the stylesheet is two folders up.
  const css = readFileSync(resolve(__dirname, '../../style/base.css'), 'utf8');
  const rule = new RegExp(`\\.jp-MlpLive-rank\\[data-state='${state}'\\][^{]*\\{([^}]*)\\}`, 'g');
  return [...css.matchAll(rule)].map(m => m[1].replace(/\s+/g, ' ').trim()).join(' ');
}

test('every rank state has a style of its own in the rank rows; paused is blue', () => {
  const styles = new Map(STATE_ORDER.map(state => [state, stateStyle(state)]));
  for (const [state, style] of styles) {
    assert.match(style, /color:/, `no colour for ${state} rows in style/base.css`);
  }
  assert.equal(new Set(styles.values()).size, STATE_ORDER.length, 'two states are styled alike');
  assert.match(styles.get('paused') || '', /color: var\(--jp-brand-color1\)/);
});
