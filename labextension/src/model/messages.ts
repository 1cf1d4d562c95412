/**
 * The websocket's messages ({base_url}mlp-magic/live, cluster/live.py LiveCluster): a snapshot of
 * the document, then patches of it, each numbered (seq); GPU samples unnumbered (they change no
 * document); a GPU history numbered as the document it follows.
 */
import type { GpuSample, IClusterDoc } from './documents';

/** A key or a list index into the document. */
export type PathPart = string | number;

/** core/doc_delta.py: ["set", path, value] or ["del", path]. */
export type PatchOp = ['set', PathPart[], unknown] | ['del', PathPart[]];

export interface ISnapshotMessage {
  type: 'snapshot';
  seq: number;
  server_time: string;
  doc: IClusterDoc;
}

export interface IPatchMessage {
  type: 'patch';
  seq: number;
  server_time: string;
  ops: PatchOp[];
}

/** Every host's newest samples (cluster/gpu_feed.py samples_message); outside the sequence. */
export interface IGpusMessage {
  type: 'gpus';
  /** The server sends none; a numbered one must follow the last in sequence. */
  seq?: number;
  server_time: string;
  /** Epoch seconds of the samples. */
  t: number;
  hosts: { [host: string]: GpuSample[] };
}

/** The sparklines' last ten minutes (cluster/gpu_feed.py history_message): per host and GPU,
 * one value every step_s seconds from t0 (null: no sample then). */
export interface IGpuHistoryMessage {
  type: 'gpu_history';
  seq: number;
  server_time: string;
  step_s: number;
  t0: number;
  hosts: { [host: string]: { util: (number | null)[][]; mem: (number | null)[][] } };
}

export type LiveMessage =
  | ISnapshotMessage
  | IPatchMessage
  | IGpusMessage
  | IGpuHistoryMessage;
