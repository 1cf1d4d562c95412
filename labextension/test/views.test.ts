import { test } from 'node:test';
import assert from 'node:assert/strict';

import { unknownText } from '../src/view/gpusection';
import { MAX_VISIBLE_ROWS, ROW_HEIGHT, visibleRange } from '../src/view/ranklist';

test('only the rows in view, and a few around, are drawn', () => {
  const view = MAX_VISIBLE_ROWS * ROW_HEIGHT;
  // 512 ranks on 64 hosts: 576 rows, of which about 16 + 2 x 6 exist at a time.
  assert.deepEqual(visibleRange(576, 0, view), [0, 22]);
  assert.deepEqual(visibleRange(576, 100 * ROW_HEIGHT, view), [94, 122]);
  assert.deepEqual(visibleRange(576, 576 * ROW_HEIGHT - view, view), [554, 576]);
  assert.deepEqual(visibleRange(576, 1e9, view), [576, 576]);
  assert.deepEqual(visibleRange(4, 0, 4 * ROW_HEIGHT), [0, 4]);
  assert.deepEqual(visibleRange(0, 0, 0), [0, 0]);
  const [first, end] = visibleRange(576, 2345, view);
  assert.ok(end - first <= MAX_VISIBLE_ROWS + 13);
});

test('hosts without a GPU sampler are named on one line', () => {
  assert.equal(unknownText(['a']), 'GPUs not sampled on a (no sampler has reported yet)');
  const many = Array.from({ length: 64 }, (_, i) => `w${i}`);
  assert.equal(unknownText(many), 'GPUs not sampled on w0, w1, w2, w3, w4, w5 +58 (no sampler has reported yet)');
});
