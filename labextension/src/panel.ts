/**
 * The "MLP Cluster" side panel: polls the server extension and draws the snapshot.
 */
import { Poll } from '@lumino/polling';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import {
  fetchCluster,
  IClusterSnapshot,
  refreshCluster,
  ServerExtensionMissing
} from './api';
import { clusterIcon } from './icon';
import { hostRows, IGpuBar, IHostRow, updatedText, worldsText } from './model';

const POLL_INTERVAL_MS = 5000;
const POLL_MAX_BACKOFF_MS = 60000;

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function bar(fraction: number | null, text: string, kind: string): HTMLElement {
  const outer = element('div', `jp-MlpCluster-bar jp-MlpCluster-bar-${kind}`);
  const fill = element('div', 'jp-MlpCluster-barFill');
  fill.style.width = `${Math.round((fraction ?? 0) * 100)}%`;
  outer.append(fill, element('span', 'jp-MlpCluster-barText', text));
  outer.title = text;
  return outer;
}

function gpuRow(gpu: IGpuBar): HTMLElement {
  const row = element('div', 'jp-MlpCluster-gpu');
  const label = element('span', 'jp-MlpCluster-gpuLabel', gpu.label);
  label.title = gpu.model;
  row.append(
    label,
    bar(gpu.memoryFraction, gpu.memoryText, 'memory'),
    bar(gpu.utilizationFraction, gpu.utilizationText, 'utilization')
  );
  return row;
}

const REACHABLE_MARK = { yes: '✔', no: '✘', unknown: '?' };

// [header, tooltip]: short headers keep the table inside the default sidebar width.
const COLUMNS: [string, string][] = [
  ['host', 'host name, in hostfile order'],
  ['slots', 'slots (ranks a full job puts there)'],
  ['ranks', 'ranks of a full job on this host'],
  ['up', 'reachable: a TCP connect to its ssh port answered'],
  ['engines', 'engines of running Worlds, by state']
];

function hostTable(rows: IHostRow[]): HTMLTableElement {
  const table = element('table', 'jp-MlpCluster-hosts');
  const head = table.createTHead().insertRow();
  for (const [title, tooltip] of COLUMNS) {
    const th = element('th', '', title);
    th.title = tooltip;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    tr.className = `jp-MlpCluster-host jp-MlpCluster-reachable-${row.reachable}`;
    tr.dataset.host = row.name;
    tr.insertCell().textContent = row.name;
    tr.insertCell().textContent = row.slots === null ? '' : `${row.slots}`;
    tr.insertCell().textContent = row.ranks;
    const reachable = tr.insertCell();
    reachable.textContent = REACHABLE_MARK[row.reachable];
    reachable.title = row.reachableDetail;
    reachable.className = 'jp-MlpCluster-reachableCell';
    const engines = tr.insertCell();
    engines.className = 'jp-MlpCluster-engines';
    engines.textContent = row.engines || '–';
    if (row.gpus.length > 0) {
      const gpus = body.insertRow().insertCell();
      gpus.colSpan = COLUMNS.length;
      gpus.className = 'jp-MlpCluster-gpus';
      gpus.append(
        element('div', 'jp-MlpCluster-gpuModels', row.gpuModels),
        ...row.gpus.map(gpuRow)
      );
    }
  }
  return table;
}

export class ClusterPanel extends Widget {
  constructor() {
    super();
    this.id = 'mlp-magic-cluster';
    this.addClass('jp-MlpCluster');
    this.title.icon = clusterIcon;
    this.title.caption = 'MLP Cluster';

    const header = element('div', 'jp-MlpCluster-header');
    const refresh = element('button', 'jp-MlpCluster-refresh jp-mod-styled', 'Refresh');
    refresh.title = 'Probe the hosts again now';
    refresh.addEventListener('click', () => void this.refreshNow());
    header.append(element('h2', 'jp-MlpCluster-title', 'MLP Cluster'), refresh);
    this._status = element('div', 'jp-MlpCluster-status', 'loading…');
    this._content = element('div', 'jp-MlpCluster-content');
    this.node.append(header, this._status, this._content);

    this._poll = new Poll({
      factory: () => this.load(fetchCluster),
      frequency: { interval: POLL_INTERVAL_MS, backoff: true, max: POLL_MAX_BACKOFF_MS },
      // Stand by while the panel is not shown, or the browser tab is hidden.
      standby: () => !this.isVisible || 'when-hidden',
      name: 'mlp-magic:cluster'
    });
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    void this._poll.refresh();
  }

  private async refreshNow(): Promise<void> {
    try {
      await this.load(refreshCluster);
    } catch {
      // load() already shows the error; the poll keeps its own schedule.
    }
  }

  /** Fetch, then draw; a failure is shown and rethrown so the poll backs off. */
  private async load(request: () => Promise<IClusterSnapshot>): Promise<void> {
    try {
      this.render(await request());
    } catch (error) {
      this.showError(error);
      throw error;
    }
  }

  private render(snapshot: IClusterSnapshot): void {
    this.removeClass('jp-mod-error');
    const parts: HTMLElement[] = [];
    if (snapshot.error) {
      parts.push(element('div', 'jp-MlpCluster-error', snapshot.error));
    }
    if (snapshot.source !== null) {
      parts.push(
        element('div', 'jp-MlpCluster-source', `${snapshot.source}, master ${snapshot.master_addr}`),
        hostTable(hostRows(snapshot))
      );
    }
    parts.push(element('div', 'jp-MlpCluster-worlds', worldsText(snapshot)));
    this._content.replaceChildren(...parts);
    this._lastUpdate = updatedText(snapshot);
    this._status.textContent = this._lastUpdate;
  }

  private showError(error: unknown): void {
    this.addClass('jp-mod-error');
    const message =
      error instanceof ServerExtensionMissing
        ? error.message
        : `Cannot load the cluster status: ${(error as Error).message || error}. Retrying with backoff.`;
    this._status.textContent = this._lastUpdate
      ? `update failed; last good one ${this._lastUpdate.replace('updated ', '')}`
      : 'no update yet';
    this._content.replaceChildren(element('div', 'jp-MlpCluster-error', message));
  }

  private _lastUpdate = '';
  private _poll: Poll;
  private _status: HTMLElement;
  private _content: HTMLElement;
}
