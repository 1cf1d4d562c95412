import { test } from 'node:test';
import assert from 'node:assert/strict';

import type { IFetchedDoc } from '../src/live/routes';
import type { IClusterDoc } from '../src/model/documents';
import type { LiveMessage } from '../src/model/messages';
import {
  backoffDelay,
  ConnectionState,
  HEALTHY_MS,
  ILiveEnv,
  ISocketLike,
  LiveConnection,
  pollDelay,
  SNAPSHOT_TIMEOUT_MS
} from '../src/live/connection';
import { LiveStore } from '../src/model/store';

const T0 = Date.parse('2026-11-25T10:00:00.000+00:00');
const SERVER_TIME = '2026-11-25T10:00:30.000+00:00'; // the server's clock is 30 s ahead

function doc(ranks = 2): IClusterDoc {
  return {
    source: 'hostfile', master_addr: 'w0', is_local: false, total_slots: ranks, error: null,
    updated_at: SERVER_TIME,
    hosts: [{ name: 'w0', slots: ranks, index: 0, ranks: [0, 1], reachable: true, probe_ms: 1, error: null, gpus: null, hints: [], engines: [], live_gpus: null, health: null }],
    worlds: [{ id: 'w0-1-1', pid: 1, ranks: Array.from({ length: ranks }, (_, r) => ({ rank: r, host: 'w0', state: 'idle', since: SERVER_TIME })) }]
  };
}

const snapshot = (seq: number, d = doc()): LiveMessage => ({ type: 'snapshot', seq, server_time: SERVER_TIME, doc: d });
const patch = (seq: number, ops: LiveMessage extends never ? never : unknown[]): LiveMessage =>
  ({ type: 'patch', seq, server_time: SERVER_TIME, ops } as LiveMessage);

test('the reconnect schedule: 0.5 s doubling to 10 s', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 50].map(backoffDelay), [500, 1000, 2000, 4000, 8000, 10000, 10000, 10000]);
  assert.equal(backoffDelay(-1), 500);
  assert.deepEqual([0, 1, 2, 3, 4, 9].map(pollDelay), [5000, 10000, 20000, 40000, 60000, 60000]);
});

test('the store: snapshot, patches in sequence, a gap, the server clock', () => {
  const store = new LiveStore();
  assert.equal(store.receive(patch(1, [['set', ['error'], 'x']]), T0), 'gap', 'a patch before any snapshot');
  store.newConnection();
  assert.equal(store.receive(snapshot(1), T0), 'doc');
  assert.equal(store.serverNow(T0), T0 + 30000);
  const before = store.doc;
  assert.equal(store.receive(patch(2, [['set', ['worlds', 0, 'ranks', 1, 'state'], 'busy']]), T0), 'doc');
  assert.equal(store.doc?.worlds[0].ranks?.[1].state, 'busy');
  assert.equal(store.doc?.worlds[0].ranks?.[0], before?.worlds[0].ranks?.[0], 'unchanged rank kept');
  assert.equal(store.receive(patch(4, []), T0), 'gap', 'seq 3 is missing');
  assert.equal(store.seq, 2);
  assert.equal(store.receive(patch(3, [['set', ['nope', 'x'], 1]]), T0), 'gap', 'an op that does not fit');
  assert.equal(store.receive({ type: 'gpus', seq: 3, server_time: SERVER_TIME, t: 100, hosts: { w0: [[1, 2, 3, 4, 0, 0, 0]] } }, T0), 'gpus');
  assert.equal(store.history.latest.get('w0')?.[0][0], 1);
  assert.equal(store.receive({ type: 'gpu_history', seq: 4, server_time: SERVER_TIME, t0: 0, step_s: 10, hosts: {} }, T0), 'gpus');
  assert.equal(store.receive({ type: 'what', seq: 5 } as unknown as LiveMessage, T0), 'ignored');
  assert.equal(store.seq, 4);
  assert.equal(store.receive(null as unknown as LiveMessage, T0), 'ignored');
  const versions = store.docVersion;
  store.setPolled(doc(), T0 + 1000, T0);
  assert.equal(store.docVersion, versions + 1);
  assert.equal(store.offsetMs, 1000);
});

test('gpu_history is taken numbered in the sequence or outside it; unnumbered samples too', () => {
  const store = new LiveStore();
  store.newConnection();
  store.receive(snapshot(7), T0);
  // The server's counter is shared by every subscriber: this one's history carries no new seq.
  assert.equal(store.receive({ type: 'gpu_history', seq: 7, server_time: SERVER_TIME, t0: 0, step_s: 10, hosts: {} }, T0), 'gpus');
  assert.equal(store.receive(patch(8, []), T0), 'doc');
  // A counter per connection: the history is the next number.
  assert.equal(store.receive({ type: 'gpu_history', seq: 9, server_time: SERVER_TIME, t0: 0, step_s: 10, hosts: {} }, T0), 'gpus');
  assert.equal(store.receive(patch(10, []), T0), 'doc');
  assert.equal(store.receive({ type: 'gpus', server_time: SERVER_TIME, t: 5, hosts: {} } as unknown as LiveMessage, T0), 'gpus');
  assert.equal(store.receive(patch(11, []), T0), 'doc');
  assert.equal(store.receive({ type: 'gpus', seq: 13, server_time: SERVER_TIME, t: 6, hosts: {} }, T0), 'gap');
  assert.equal(store.receive({ type: 'patch', server_time: SERVER_TIME, ops: [] } as unknown as LiveMessage, T0), 'gap');
});

test('GPU samples may come before the snapshot on a new connection', () => {
  const store = new LiveStore();
  store.newConnection();
  assert.equal(store.receive({ type: 'gpu_history', seq: 1, server_time: SERVER_TIME, t0: 0, step_s: 10, hosts: {} }, T0), 'gpus');
  assert.equal(store.receive(snapshot(2), T0), 'doc');
  assert.equal(store.receive(patch(3, []), T0), 'doc');
});

// ------------------------------------------------------------ the connection, with fakes

class FakeSocket implements ISocketLike {
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: unknown) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  closed = false;
  close(): void {
    this.closed = true;
  }
  open(): void {
    this.onopen?.({});
  }
  send(message: LiveMessage | string): void {
    this.onmessage?.({ data: typeof message === 'string' ? message : JSON.stringify(message) });
  }
  fail(): void {
    this.onerror?.({});
    this.onclose?.({});
  }
}

class FakeEnv implements ILiveEnv {
  time = T0;
  timers: { at: number; fn: () => void; id: number }[] = [];
  sockets: FakeSocket[] = [];
  fetches = 0;
  fetchResult: () => Promise<IFetchedDoc> = async () => ({ doc: doc(), serverTimeMs: null });
  hidden = false;
  private nextId = 1;

  openSocket(): ISocketLike {
    const socket = new FakeSocket();
    this.sockets.push(socket);
    return socket;
  }
  fetchDoc(): Promise<IFetchedDoc> {
    this.fetches++;
    return this.fetchResult();
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.push({ at: this.time + ms, fn, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter(t => t.id !== handle);
  }
  now(): number {
    return this.time;
  }
  isHidden(): boolean {
    return this.hidden;
  }
  /** The delays of the timers pending now. */
  pending(): number[] {
    return this.timers.map(t => t.at - this.time).sort((a, b) => a - b);
  }
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      await flush();
      const due = this.timers.filter(t => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) {
        break;
      }
      this.timers = this.timers.filter(t => t !== due);
      this.time = due.at;
      due.fn();
    }
    this.time = end;
    await flush();
  }
  get socket(): FakeSocket {
    return this.sockets[this.sockets.length - 1];
  }
}

function flush(): Promise<void> {
  return new Promise(resolve => setImmediate(resolve));
}

function connection(env: FakeEnv) {
  const states: ConnectionState[] = [];
  const events: string[] = [];
  const live = new LiveConnection(new LiveStore(), env, {
    onDoc: () => events.push('doc'),
    onGpus: () => events.push('gpus'),
    onState: state => states.push(state)
  });
  return { live, states, events };
}

test('connects, goes live on the snapshot, follows patches', async () => {
  const env = new FakeEnv();
  const { live, states, events } = connection(env);
  live.start();
  assert.equal(env.sockets.length, 1);
  assert.equal(live.state, 'reconnecting');
  env.socket.open();
  env.socket.send(snapshot(1));
  assert.equal(live.state, 'live');
  assert.ok(live.everLive);
  env.socket.send(patch(2, [['set', ['worlds', 0, 'ranks', 0, 'state'], 'busy']]));
  env.socket.send({ type: 'gpus', seq: 3, server_time: SERVER_TIME, t: 1, hosts: {} });
  assert.deepEqual(events, ['doc', 'doc', 'gpus']);
  assert.deepEqual(states, ['live']);
  assert.equal(live.store.doc?.worlds[0].ranks?.[0].state, 'busy');
  assert.equal(env.fetches, 0, 'no polling while live');
  await env.advance(60000);
  assert.equal(env.fetches, 0);
  assert.equal(env.sockets.length, 1);
  assert.deepEqual(env.pending(), [], 'the snapshot timeout was cleared');
});

test('a broken socket: backoff 0.5 s doubling to 10 s, polling every 5 s meanwhile', async () => {
  const env = new FakeEnv();
  const { live, states } = connection(env);
  live.start();
  env.socket.fail();
  await flush();
  assert.equal(env.fetches, 1, 'polls at once');
  assert.equal(live.state, 'polling');
  assert.deepEqual(states, ['polling']);
  assert.ok(live.store.doc, 'the polled document is shown');
  const delays: number[] = [];
  for (let i = 0; i < 7; i++) {
    const opened = env.sockets.length;
    const start = env.time;
    while (env.sockets.length === opened) {
      await env.advance(100);
    }
    delays.push(env.time - start);
    env.socket.fail();
  }
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 10000, 10000]);
  const elapsed = env.time - T0;
  assert.equal(env.fetches, 1 + Math.floor(elapsed / 5000), 'a poll every 5 s');
  // The socket comes back: polling stops, live again, the backoff starts over.
  await env.advance(10000);
  env.socket.open();
  env.socket.send(snapshot(1));
  assert.equal(live.state, 'live');
  const fetches = env.fetches;
  await env.advance(30000);
  assert.equal(env.fetches, fetches);
  env.socket.fail();
  assert.equal(live.state, 'reconnecting');
  assert.deepEqual(env.pending()[0], 500);
});

test('a connection that breaks right after its snapshot backs off all the same', async () => {
  const env = new FakeEnv();
  const { live } = connection(env);
  live.start();
  const delays: number[] = [];
  for (let i = 0; i < 6; i++) {
    env.socket.send(snapshot(1));
    env.socket.send(patch(5, [])); // a gap, every time
    const opened = env.sockets.length;
    const start = env.time;
    while (env.sockets.length === opened) {
      await env.advance(100);
    }
    delays.push(env.time - start);
  }
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 10000]);
  assert.equal(live.state, 'polling');
  // Healthy for HEALTHY_MS: the next break starts over at 0.5 s.
  env.socket.send(snapshot(1));
  await env.advance(HEALTHY_MS);
  env.socket.fail();
  assert.equal(env.pending()[0], 500);
});

test('a seq gap reconnects for a new snapshot', async () => {
  const env = new FakeEnv();
  const { live } = connection(env);
  live.start();
  env.socket.send(snapshot(1));
  const first = env.socket;
  first.send(patch(3, []));
  assert.ok(first.closed);
  await env.advance(500);
  assert.equal(env.sockets.length, 2);
  env.socket.send(snapshot(7));
  env.socket.send(patch(8, [['set', ['error'], 'e']]));
  assert.equal(live.store.doc?.error, 'e');
  // Messages of the old socket are not heard any more.
  first.send(patch(9, [['set', ['error'], 'old']]));
  assert.equal(live.store.doc?.error, 'e');
  // A frame that is not JSON is a gap too.
  env.socket.send('{not json');
  assert.ok(env.socket.closed);
});

test('stop closes everything; start catches up with a new snapshot', async () => {
  const env = new FakeEnv();
  const { live } = connection(env);
  live.start();
  env.socket.send(snapshot(1));
  live.stop();
  assert.ok(env.socket.closed);
  assert.deepEqual(env.pending(), []);
  await env.advance(60000);
  assert.equal(env.sockets.length, 1);
  assert.equal(env.fetches, 0);
  live.start();
  assert.equal(env.sockets.length, 2);
  // Stopped while broken: no poll or reconnect goes on.
  env.socket.fail();
  await flush();
  live.stop();
  const fetches = env.fetches;
  await env.advance(60000);
  assert.equal(env.fetches, fetches);
  assert.equal(env.sockets.length, 2);
});

test('failing polls say so and back off; a hidden tab does not poll', async () => {
  const env = new FakeEnv();
  const missing = new Error('The mlp_magic server extension is not enabled');
  env.fetchResult = () => Promise.reject(missing);
  const { live } = connection(env);
  live.start();
  env.socket.fail();
  await flush();
  assert.equal(live.state, 'reconnecting');
  assert.equal(live.error, missing);
  const times: number[] = [];
  let seen = env.fetches;
  while (env.time - T0 < 200000) {
    await env.advance(1000);
    if (env.fetches !== seen) {
      seen = env.fetches;
      times.push(env.time - T0);
    }
    if (env.socket.onclose) {
      env.socket.fail();
    }
  }
  assert.deepEqual(times.slice(0, 5), [10000, 30000, 70000, 130000, 190000]);
  // It works again: polling every 5 s.
  env.fetchResult = async () => ({ doc: doc(), serverTimeMs: null });
  await env.advance(60000);
  assert.equal(live.state, 'polling');
  assert.equal(live.error, null);
  env.hidden = true;
  const before = env.fetches;
  await env.advance(20000);
  assert.equal(env.fetches, before);
});

test('a socket that opens but sends no snapshot is given up', async () => {
  const env = new FakeEnv();
  const { live } = connection(env);
  live.start();
  env.socket.open();
  await env.advance(SNAPSHOT_TIMEOUT_MS - 1);
  assert.equal(env.sockets.length, 1);
  await env.advance(1);
  assert.ok(env.sockets[0].closed);
  await env.advance(500);
  assert.equal(env.sockets.length, 2);
  assert.equal(live.state, 'polling');
});

test('a refreshed document is shown unless live', () => {
  const env = new FakeEnv();
  const { live, events } = connection(env);
  live.start();
  live.acceptDoc({ doc: doc(3), serverTimeMs: null });
  assert.equal(live.store.doc?.worlds[0].ranks?.length, 3);
  env.socket.send(snapshot(1, doc(2)));
  live.acceptDoc({ doc: doc(5), serverTimeMs: null });
  assert.equal(live.store.doc?.worlds[0].ranks?.length, 2);
  assert.deepEqual(events, ['doc', 'doc']);
});
