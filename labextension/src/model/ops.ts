/**
 * Patches of the document (pure, no DOM): the websocket's "patch" ops applied copy-on-write.
 *
 * The document is never changed in place: every container on a changed path is copied (once
 * per batch), the rest is shared. A view can then tell what changed by comparing references:
 * a rank whose object is the same as before is drawn as before.
 */
import type { PatchOp, PathPart } from './messages';

/** An op that does not fit the document: the client lost track and must start again. */
export class PatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PatchError';
  }
}

type Container = Record<string, unknown> | unknown[];

function isContainer(value: unknown): value is Container {
  return typeof value === 'object' && value !== null;
}

function shallowCopy(value: Container): Container {
  return Array.isArray(value) ? value.slice() : { ...value };
}

function childOf(parent: Container, key: PathPart, path: PathPart[]): unknown {
  if (Array.isArray(parent)) {
    if (typeof key !== 'number' || key < 0 || key >= parent.length) {
      throw new PatchError(`no index ${String(key)} at ${JSON.stringify(path)}`);
    }
    return parent[key];
  }
  if (typeof key !== 'string' || !Object.prototype.hasOwnProperty.call(parent, key)) {
    throw new PatchError(`no key ${String(key)} at ${JSON.stringify(path)}`);
  }
  return parent[key];
}

function setChild(parent: Container, key: PathPart, value: unknown, path: PathPart[]): void {
  if (Array.isArray(parent)) {
    // An index one past the end appends; anything else must exist.
    if (typeof key !== 'number' || key < 0 || key > parent.length) {
      throw new PatchError(`cannot set index ${String(key)} at ${JSON.stringify(path)}`);
    }
    parent[key] = value;
  } else {
    if (typeof key !== 'string') {
      throw new PatchError(`a number ${key} as a key at ${JSON.stringify(path)}`);
    }
    parent[key] = value;
  }
}

function deleteChild(parent: Container, key: PathPart, path: PathPart[]): void {
  childOf(parent, key, path); // it must exist
  if (Array.isArray(parent)) {
    parent.splice(key as number, 1);
  } else {
    delete parent[key as string];
  }
}

/**
 * The document after `ops`, applied in order; `doc` itself is left as it was.
 * Throws PatchError when an op does not fit (a path through nothing, a bad index).
 */
export function applyOps<T>(doc: T, ops: PatchOp[]): T {
  let root: unknown = doc;
  const copied = new Set<unknown>(); // containers copied in this batch: changed in place after
  const writable = (value: Container): Container => {
    if (copied.has(value)) {
      return value;
    }
    const copy = shallowCopy(value);
    copied.add(copy);
    return copy;
  };
  for (const op of ops) {
    const [kind, path] = op;
    if (!Array.isArray(path)) {
      throw new PatchError(`bad path ${JSON.stringify(path)}`);
    }
    if (path.length === 0) {
      if (kind !== 'set') {
        throw new PatchError('cannot delete the document');
      }
      root = op[2];
      continue;
    }
    if (!isContainer(root)) {
      throw new PatchError('the document is not an object');
    }
    root = writable(root);
    let parent = root as Container;
    for (let i = 0; i < path.length - 1; i++) {
      const child = childOf(parent, path[i], path);
      if (!isContainer(child)) {
        throw new PatchError(`no container at ${JSON.stringify(path.slice(0, i + 1))}`);
      }
      const copy = writable(child);
      setChild(parent, path[i], copy, path);
      parent = copy;
    }
    const last = path[path.length - 1];
    if (kind === 'set') {
      setChild(parent, last, op[2], path);
    } else if (kind === 'del') {
      deleteChild(parent, last, path);
    } else {
      throw new PatchError(`unknown op ${JSON.stringify(kind)}`);
    }
  }
  return root as T;
}

/**
 * `next`, with every part deep-equal to the same part of `prev` replaced by prev's object: a
 * polled or re-sent document keeps the references of what did not change.
 */
export function shareUnchanged<T>(prev: unknown, next: T): T {
  return (share(prev, next) as T);
}

function share(prev: unknown, next: unknown): unknown {
  if (prev === next || !isContainer(prev) || !isContainer(next)) {
    return next;
  }
  if (Array.isArray(prev) !== Array.isArray(next)) {
    return next;
  }
  let same = true;
  if (Array.isArray(next)) {
    const before = prev as unknown[];
    const out = next.map((item, i) => (i < before.length ? share(before[i], item) : item));
    same = before.length === out.length && out.every((item, i) => item === before[i]);
    return same ? prev : out;
  }
  const before = prev as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const keys = Object.keys(next);
  for (const key of keys) {
    out[key] = share(before[key], (next as Record<string, unknown>)[key]);
    if (!(key in before) || out[key] !== before[key]) {
      same = false;
    }
  }
  if (same && Object.keys(before).length === keys.length) {
    return prev;
  }
  return out;
}
