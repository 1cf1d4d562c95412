import { test } from 'node:test';
import assert from 'node:assert/strict';

import { errorText, liveSocketUrl, routeUrl, ServerExtensionMissing } from '../src/live/routes';

test('the websocket URL, with the token only where @jupyterlab/services adds it', () => {
  assert.equal(liveSocketUrl('ws://h:8888/', 'abc', false), 'ws://h:8888/mlp-magic/live');
  assert.equal(liveSocketUrl('ws://h:8888/base/', 'a b', true), 'ws://h:8888/base/mlp-magic/live?token=a%20b');
  assert.equal(liveSocketUrl('wss://h/base', '', true), 'wss://h/base/mlp-magic/live');
});

test('route URLs encode their parts', () => {
  assert.equal(routeUrl('http://h/base/', 'worlds', 'w0-1-1', 'interrupt'), 'http://h/base/mlp-magic/worlds/w0-1-1/interrupt');
  assert.equal(routeUrl('/', 'worlds', 'a/b?c', 'stacks'), '/mlp-magic/worlds/a%2Fb%3Fc/stacks');
});

test('a missing server extension says what to do', () => {
  const error = new ServerExtensionMissing();
  assert.match(error.message, /server extension is not enabled/);
  assert.match(error.message, /jupyter server extension enable mlp_magic.server/);
  assert.equal(errorText(error), error.message);
  assert.equal(errorText('plain'), 'plain');
});
