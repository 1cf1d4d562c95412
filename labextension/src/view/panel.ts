/**
 * The "MLP Cluster" side panel: a live view of the document the websocket keeps (live/),
 * drawn at most once per animation frame, and only the parts that changed.
 */
import type { CommandRegistry } from '@lumino/commands';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { browserEnv } from '../live/browser';
import { ConnectionState, ILiveEnv, LiveConnection } from '../live/connection';
import { errorText, refreshCluster, ServerExtensionMissing } from '../live/routes';
import type { IClusterDoc } from '../model/documents';
import { rankStatesOf, updatedText } from '../model/hosts';
import { LiveStore } from '../model/store';
import { NO_WORLD_TEXT, worldKey } from '../model/worlds';
import { el, setAttr, setText } from './dom';
import { GpuSection } from './gpusection';
import { HostTable } from './hosttable';
import { clusterIcon } from './icon';
import { WorldView } from './worldview';

/** The host table starts open up to this many hosts, closed above. */
const HOSTS_OPEN_UP_TO = 8;

/** From this width on the panel lays out wide (worlds beside the GPUs: frontends.css). */
export const WIDE_FROM_PX = 900;

/** Ages ("busy 43 s") move on once a second. */
const TICK_MS = 1000;

const STATE_TEXT: { [state in ConnectionState]: string } = {
  live: '● live',
  reconnecting: 'reconnecting…',
  polling: 'polling every 5 s'
};

const STATE_TITLE: { [state in ConnectionState]: string } = {
  live: 'Changes arrive as they happen (websocket).',
  reconnecting: 'The live connection is down; trying again (0.5 s doubling to 10 s).',
  polling: 'The live connection cannot be made; the cluster is polled every 5 s meanwhile.'
};

export interface IPanelOptions {
  commands?: CommandRegistry | null;
  env?: ILiveEnv;
  /** Shown as the header's "open in a tab" link (the sidebar's panel; not the tab itself). */
  openInTab?: (() => void) | null;
}

export class ClusterPanel extends Widget {
  constructor(options: IPanelOptions = {}) {
    super();
    this.id = 'mlp-magic-cluster';
    this.addClass('jp-MlpCluster');
    this.title.icon = clusterIcon;
    this.title.caption = 'MLP Cluster';
    this._commands = options.commands ?? null;

    const header = this.header(options.openInTab ?? null);
    this._connection = el('span', 'jp-MlpLive-connection');
    const statusLine = el('div', 'jp-MlpLive-statusLine');
    this._status = el('span', 'jp-MlpCluster-status', 'loading…');
    statusLine.append(this._connection, this._status);
    this._error = el('div', 'jp-MlpCluster-error');
    this._error.hidden = true;
    // The server's own error about the cluster (no hostfile...); .jp-MlpCluster-error is the
    // connection's, one element only.
    this._docError = el('div', 'jp-MlpLive-docError');
    this._docError.hidden = true;
    this._source = el('div', 'jp-MlpCluster-source');
    this._hosts = new HostTable();
    this._worlds = el('div', 'jp-MlpLive-worlds');
    this._noWorld = el('div', 'jp-MlpCluster-worlds', NO_WORLD_TEXT);
    this._store = new LiveStore();
    this._gpus = new GpuSection(this._store.history);
    this._gpus.onChange = () => this.schedule();
    this._content = el('div', 'jp-MlpCluster-content');
    this._hostsBox = el('details', 'jp-MlpLive-hostsBox');
    this._hostsTitle = el('summary', 'jp-MlpLive-sectionTitle', 'Hosts');
    this._hostsBox.append(this._hostsTitle, this._source, this._hosts.node);
    this._content.append(
      this._docError,
      el('h3', 'jp-MlpLive-sectionTitle', 'Worlds'),
      this._noWorld,
      this._worlds,
      this._gpus.node,
      this._hostsBox
    );
    this._content.hidden = true;
    this.node.append(header, statusLine, this._error, this._content);

    this._live = new LiveConnection(this._store, options.env ?? browserEnv(), {
      onDoc: () => this.schedule(),
      onGpus: () => this.schedule(),
      onState: () => this.schedule()
    });
    this.showState();
  }

  /** The title, the "open in a tab" link when there is a way to, and the Refresh button. */
  private header(openInTab: (() => void) | null): HTMLElement {
    const header = el('div', 'jp-MlpCluster-header');
    header.append(el('h2', 'jp-MlpCluster-title', 'MLP Cluster'));
    if (openInTab) {
      const open = el('button', 'jp-MlpLive-link jp-MlpCluster-openTab', 'open in a tab');
      open.type = 'button';
      open.title = 'Open this view in a main-area tab (wide: the Worlds beside the GPUs)';
      open.addEventListener('click', () => openInTab());
      header.append(open);
    }
    const refresh = el('button', 'jp-MlpCluster-refresh jp-mod-styled', 'Refresh');
    refresh.type = 'button';
    refresh.title = 'Probe the hosts again now';
    refresh.addEventListener('click', () => void this.refreshNow());
    header.append(refresh);
    return header;
  }

  /** The connection (tests, benchmarks). */
  get connection(): LiveConnection {
    return this._live;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._resize?.disconnect();
    this.standBy();
    this._gpus.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.wake();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.watchWidth();
    if (this.isVisible) {
      this.wake();
    }
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.standBy();
  }

  protected onBeforeDetach(msg: Message): void {
    this._resize?.disconnect();
    this._resize = null;
    this.standBy();
    super.onBeforeDetach(msg);
  }

  /** Wide or narrow as the node's own width goes (a sidebar, a tab, a page, whatever resizes it). */
  private watchWidth(): void {
    if (this._resize !== null || typeof ResizeObserver === 'undefined') {
      return;
    }
    this._resize = new ResizeObserver(entries => {
      const width = entries[entries.length - 1].contentRect.width;
      this.toggleClass('jp-mod-wide', width >= WIDE_FROM_PX);
    });
    this._resize.observe(this.node);
  }

  /** Shown: connect (a snapshot brings the panel up to date) and let ages move on. */
  private wake(): void {
    this._live.start();
    if (this._tick === null) {
      this._tick = window.setInterval(() => {
        this._ticked = true;
        this.schedule();
      }, TICK_MS);
    }
    this.schedule();
  }

  /** Hidden: no socket, no polls, no timers. */
  private standBy(): void {
    this._live.stop();
    if (this._tick !== null) {
      window.clearInterval(this._tick);
      this._tick = null;
    }
    if (this._frame !== null) {
      cancelAnimationFrame(this._frame);
      this._frame = null;
    }
  }

  private async refreshNow(): Promise<void> {
    try {
      this._live.acceptDoc(await refreshCluster());
      this._refreshError = null;
    } catch (error) {
      this._refreshError = error;
    }
    this.schedule();
  }

  /** Draw at the next animation frame (many messages in one frame: one drawing). */
  private schedule(): void {
    if (this._frame === null && !this.isDisposed) {
      this._frame = requestAnimationFrame(() => {
        this._frame = null;
        this.render();
      });
    }
  }

  private render(): void {
    this.showState();
    const doc = this._store.doc;
    if (!doc) {
      return;
    }
    const docChanged = this._store.docVersion !== this._drawnDoc;
    const gpusChanged = this._store.gpuVersion !== this._drawnGpus;
    const ticked = this._ticked;
    this._drawnDoc = this._store.docVersion;
    this._drawnGpus = this._store.gpuVersion;
    this._ticked = false;
    const nowMs = this._store.serverNow(Date.now());
    this._content.hidden = this._live.error instanceof ServerExtensionMissing;
    if (docChanged) {
      this.renderDoc(doc);
    }
    if (docChanged || ticked || this._worldsDirty) {
      this._worldsDirty = false;
      this.renderWorlds(doc, nowMs);
    }
    {
      const nowS = Number.isFinite(this._store.history.latestT) ? this._store.history.latestT : nowMs / 1000;
      this._gpus.update(doc.hosts || [], nowS, docChanged, gpusChanged);
    }
  }

  private renderDoc(doc: IClusterDoc): void {
    setText(this._status, updatedText(doc));
    this._docError.hidden = !doc.error;
    setText(this._docError, doc.error || '');
    this._hostsBox.hidden = doc.source === null;
    setText(this._source, doc.source === null ? '' : `${doc.source}, master ${doc.master_addr}`);
    // The engines column counts rank states, which live in the Worlds: either may change it.
    if (doc.hosts !== this._drawnHosts || doc.worlds !== this._drawnHostWorlds) {
      const hosts = doc.hosts || [];
      if (this._drawnHosts === null) {
        // Open at first when the table is short; the person's choice after that.
        this._hostsBox.open = hosts.length <= HOSTS_OPEN_UP_TO;
      }
      this._drawnHosts = doc.hosts;
      this._drawnHostWorlds = doc.worlds;
      setText(this._hostsTitle, `Hosts (${hosts.length})`);
      this._hosts.update(hosts, rankStatesOf(doc.worlds));
    }
  }

  private renderWorlds(doc: IClusterDoc, nowMs: number): void {
    const worlds = doc.worlds || [];
    this._noWorld.hidden = worlds.length > 0;
    const views: HTMLElement[] = [];
    const next = new Map<string, WorldView>();
    for (const world of worlds) {
      const key = worldKey(world);
      let view = this._worldViews.get(key);
      if (!view || next.has(key)) {
        view = new WorldView(world, this._commands);
        view.onChange = () => {
          this._worldsDirty = true;
          this.schedule();
        };
      }
      view.update(world, nowMs);
      next.set(key, view);
      views.push(view.node);
    }
    this._worldViews = next;
    const current = Array.from(this._worlds.children);
    if (current.length !== views.length || current.some((node, i) => node !== views[i])) {
      this._worlds.replaceChildren(...views);
    }
  }

  private showState(): void {
    const state = this._live.state;
    setAttr(this._connection, 'data-state', state);
    let label = STATE_TEXT[state];
    if (state === 'reconnecting' && this._live.error !== null) {
      label = 'offline, retrying…';
    } else if (state === 'reconnecting' && !this._live.everLive) {
      label = 'connecting…';
    }
    setText(this._connection, label);
    this._connection.title = STATE_TITLE[state];
    const error = this._live.error ?? this._refreshError;
    this._error.hidden = error === null;
    if (error !== null) {
      this.showError(error);
    }
    this.toggleClass('jp-mod-error', error !== null);
    // Data kept from before a break is shown dimmed until the connection is back.
    this._content.classList.toggle('jp-mod-stale', state === 'reconnecting' && this._live.everLive || error !== null);
  }

  private showError(error: unknown): void {
    const message =
      error instanceof ServerExtensionMissing
        ? error.message
        : `Cannot load the cluster status: ${errorText(error)}. Retrying with backoff.`;
    setText(this._error, message);
    if (!this._store.doc) {
      setText(this._status, 'no update yet');
    } else if (this._live.error !== null) {
      setText(this._status, `update failed; last good one ${updatedText(this._store.doc).replace('updated ', '')}`);
    }
  }

  private _commands: CommandRegistry | null;
  private _store: LiveStore;
  private _live: LiveConnection;
  private _connection: HTMLElement;
  private _status: HTMLElement;
  private _error: HTMLElement;
  private _docError: HTMLElement;
  private _source: HTMLElement;
  private _content: HTMLElement;
  private _hosts: HostTable;
  private _hostsBox: HTMLDetailsElement;
  private _hostsTitle: HTMLElement;
  private _worlds: HTMLElement;
  private _noWorld: HTMLElement;
  private _gpus: GpuSection;
  private _worldViews = new Map<string, WorldView>();
  private _drawnHosts: unknown = null;
  private _drawnHostWorlds: unknown = null;
  private _drawnDoc = -1;
  private _drawnGpus = -1;
  private _ticked = false;
  private _worldsDirty = false;
  private _refreshError: unknown = null;
  private _tick: number | null = null;
  private _resize: ResizeObserver | null = null;
  private _frame: number | null = null;
}
