/**
 * The JSON documents the Python side writes for the panel (samples/*.json, written from the real
 * code by tests/unit/test_panel_samples.py), each assigned to the panel's type for it: when
 * Python drops a field the type requires, or writes another kind of value (a string for a
 * number, null where the type allows none), `tsc -p tsconfig.test.json` fails on that line.
 */
import type {
  IGpuHistoryExport,
  IInterruptAnswer,
  IRestartAnswer,
  IStacks
} from '../src/model/answers';
import type { IClusterDoc } from '../src/model/documents';
import type {
  IGpuHistoryMessage,
  IGpusMessage,
  IPatchMessage,
  ISnapshotMessage,
  LiveMessage
} from '../src/model/messages';

import interruptJson from './samples/action_interrupt.json';
import restartJson from './samples/action_restart.json';
import stacksErrorJson from './samples/action_stacks_error.json';
import clusterJson from './samples/cluster.json';
import clusterErrorJson from './samples/cluster_error.json';
import historyExportJson from './samples/gpu_history_export.json';
import gpuHistoryJson from './samples/live_gpu_history.json';
import gpusJson from './samples/live_gpus.json';
import patchJson from './samples/live_patch.json';
import snapshotJson from './samples/live_snapshot.json';

/**
 * What TypeScript infers for a JSON file that holds a T. JSON has no string literal types and
 * no tuples ("patch" is a string, [0, 2, 506, 4970] a number[]); everything else is checked as
 * T says: the required keys, null or not, number, string or boolean.
 */
export type AsJson<T> = T extends string
  ? string
  : T extends number
    ? number
    : T extends boolean
      ? boolean
      : T extends null | undefined
        ? T
        : T extends readonly unknown[]
          ? AsJson<T[number]>[]
          : T extends object
            ? AsJsonObject<T>
            : T;

/**
 * A map ({[host: string]: ...}) takes `undefined` too: in a list of objects whose keys differ,
 * TypeScript types each object's missing keys as `key?: undefined`. JSON itself has no undefined.
 */
type AsJsonObject<T> = string extends keyof T
  ? { [key: string]: AsJson<T[keyof T]> | undefined }
  : { [K in keyof T]: AsJson<T[K]> };

// The tie: each sample assigned to its type (a compile error when it no longer fits).
const clusterChecked: AsJson<IClusterDoc> = clusterJson;
const clusterErrorChecked: AsJson<IClusterDoc> = clusterErrorJson;
const snapshotChecked: AsJson<ISnapshotMessage> = snapshotJson;
const patchChecked: AsJson<IPatchMessage> = patchJson;
const gpusChecked: AsJson<IGpusMessage> = gpusJson;
const gpuHistoryChecked: AsJson<IGpuHistoryMessage> = gpuHistoryJson;
const historyExportChecked: AsJson<IGpuHistoryExport> = historyExportJson;
const interruptChecked: AsJson<IInterruptAnswer> = interruptJson;
const restartChecked: AsJson<IRestartAnswer> = restartJson;
const stacksErrorChecked: AsJson<IStacks> = stacksErrorJson;

/** A message sample as its type: the one thing the compiler cannot see in JSON, the literal
 * "type", is checked here. */
function message<M extends LiveMessage>(json: AsJson<M>, type: M['type']): M {
  const said = (json as { type?: unknown }).type;
  if (said !== type) {
    throw new Error(`the ${type} sample says type ${JSON.stringify(said)}`);
  }
  return json as unknown as M;
}

/** GET mlp-magic/cluster, after the patch sample. */
export const cluster = clusterChecked as IClusterDoc;
/** GET mlp-magic/cluster when no topology could be read. */
export const clusterError = clusterErrorChecked as IClusterDoc;
export const snapshot = message<ISnapshotMessage>(snapshotChecked, 'snapshot');
export const patch = message<IPatchMessage>(patchChecked, 'patch');
export const gpus = message<IGpusMessage>(gpusChecked, 'gpus');
export const gpuHistory = message<IGpuHistoryMessage>(gpuHistoryChecked, 'gpu_history');
export const historyExport = historyExportChecked as IGpuHistoryExport;
export const interruptAnswer = interruptChecked as IInterruptAnswer;
export const restartAnswer = restartChecked as IRestartAnswer;
export const stacksErrorAnswer = stacksErrorChecked as IStacks;
