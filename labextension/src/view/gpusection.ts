/**
 * The GPUs of every host: per-host rows with sparklines when there are few hosts, a nodes x
 * GPUs heatmap on a canvas at scale (or when chosen), "no GPUs" states, and export links.
 */
import { historyExportUrl } from '../live/routes';
import type { IHostStatus } from '../model/documents';
import { GpuHistory, GpuSeries } from '../model/gpuhistory';
import { hostGpuView, IGpuView, IHostGpuView } from '../model/gpus';
import { HEAT_METRICS, HeatMetric, heatmapModel } from '../model/heatmap';
import { bar, el, setText } from './dom';
import { Heatmap } from './heatmapcanvas';
import { drawSparkline, ISparkColors, sparkColors } from './sparklines';

/** Above this many hosts with GPUs the heatmap replaces the rows (unless chosen otherwise). */
export const HEATMAP_ABOVE_HOSTS = 8;
/** Up to this many GPU rows, all are drawn; above, only the hosts in view. */
const EAGER_GPUS = 64;

type Mode = 'auto' | 'rows' | 'heatmap';

/** One GPU's row: label, utilisation and memory bars, temperature, power, marks, sparkline. */
class GpuRow {
  constructor(readonly index: number) {
    this.node = el('div', 'jp-MlpLive-gpu jp-MlpCluster-gpu');
    this.node.dataset.gpu = String(index);
    this._label = el('span', 'jp-MlpCluster-gpuLabel');
    this._memory = bar('memory');
    this._util = bar('utilization');
    this._spark = el('canvas', 'jp-MlpLive-spark');
    this._details = el('div', 'jp-MlpLive-gpuDetails');
    this.node.append(this._label, this._memory.node, this._util.node, this._spark, this._details);
  }

  readonly node: HTMLElement;

  update(gpu: IGpuView, series: GpuSeries | undefined, nowS: number, colors: ISparkColors): void {
    setText(this._label, gpu.label);
    this._label.title = gpu.name;
    this._memory.set(gpu.memFraction, gpu.memText);
    this._util.set(gpu.utilFraction, gpu.utilText);
    const details: string[] = [gpu.tempText, gpu.powerText].filter(Boolean);
    if (gpu.throttle.reasons.length) {
      details.push(`throttle: ${gpu.throttle.reasons.join(', ')}`);
    }
    details.push(...gpu.errors);
    const procs = gpu.processes.map(p => p.text).join(', ');
    const text = details.join(' · ') + (procs ? `\n${procs}` : '');
    setText(this._details, text);
    this._details.title = text;
    this.node.classList.toggle('jp-mod-throttled', gpu.throttle.slowing);
    this.node.classList.toggle('jp-mod-gpuError', gpu.errors.length > 0);
    this._spark.hidden = !series;
    if (series) {
      drawSparkline(this._spark, series, nowS, colors);
    }
  }

  private _label: HTMLElement;
  private _memory: ReturnType<typeof bar>;
  private _util: ReturnType<typeof bar>;
  private _spark: HTMLCanvasElement;
  private _details: HTMLElement;
}

/** The height a GPU row takes (CSS), for the room kept by a block not drawn yet. */
const GPU_ROW_PX = 72;

/**
 * One host's GPUs: .jp-MlpLive-gpus[data-host], with .jp-MlpLive-nogpu when it has none. Out
 * of view (and not `eager`), its rows are neither built nor updated: it keeps their room and
 * catches up when it comes into view.
 */
class HostGpus {
  constructor(readonly host: string) {
    this.node = el('div', 'jp-MlpLive-gpus');
    this.node.dataset.host = host;
    this._head = el('div', 'jp-MlpLive-gpusHead');
    this._body = el('div');
    this.node.append(this._head, this._body);
  }

  readonly node: HTMLElement;
  /** In view, as an IntersectionObserver last said (true where there is none). */
  visible = true;

  update(view: IHostGpuView, history: GpuHistory, nowS: number, eager: boolean, colors: () => ISparkColors): void {
    setText(this._head, `${view.host}${view.models ? ` · ${view.models}` : ''}` +
      (view.state !== 'nogpu' && view.message ? ` · ${view.message}` : '') +
      (view.state === 'inventory' ? ' · last probe (no live sampler)' : ''));
    const shape = `${view.state}|${view.message}|${view.gpus.map(g => g.index).join(',')}`;
    if (view.state === 'nogpu' || view.state === 'unknown') {
      if (shape !== this._shape) {
        this._shape = shape;
        this._rows = [];
        const kind = view.state === 'nogpu' ? 'jp-MlpLive-nogpu' : 'jp-MlpLive-gpuUnknown';
        this._body.replaceChildren(el('div', kind, view.message));
        this._body.style.minHeight = '';
      }
      return;
    }
    if (!this.visible && !eager) {
      if (shape !== this._shape) {
        this._shape = '';
        this._rows = [];
        this._body.replaceChildren();
        this._body.style.minHeight = `${view.gpus.length * GPU_ROW_PX}px`;
      }
      return;
    }
    if (shape !== this._shape) {
      this._shape = shape;
      this._rows = view.gpus.map(g => new GpuRow(g.index));
      this._body.replaceChildren(...this._rows.map(r => r.node));
      this._body.style.minHeight = '';
    }
    const series = history.series.get(view.host);
    const palette = colors();
    view.gpus.forEach((gpu, i) => {
      this._rows[i]?.update(gpu, view.state === 'live' ? series?.[gpu.index] : undefined, nowS, palette);
    });
  }

  private _shape = '';
  private _rows: GpuRow[] = [];
  private _head: HTMLElement;
  private _body: HTMLElement;
}

/** "GPUs not sampled on w00, w01 (no sampler has reported yet)", at most 6 names then "+N". */
export function unknownText(hosts: string[]): string {
  const names = hosts.length > 6 ? `${hosts.slice(0, 6).join(', ')} +${hosts.length - 6}` : hosts.join(', ');
  return `GPUs not sampled on ${names} (no sampler has reported yet)`;
}

/** The links that download every host's GPU history, as CSV and as JSON. */
function exportLinks(): HTMLAnchorElement[] {
  const csv = el('a', 'jp-MlpLive-export', 'CSV');
  const json = el('a', 'jp-MlpLive-export', 'JSON');
  for (const [link, format] of [[csv, 'csv'], [json, 'json']] as const) {
    link.href = historyExportUrl(format);
    link.target = '_blank';
    link.rel = 'noopener';
    link.title = `The GPU history of every host (at least 10 minutes at 1 Hz) as ${format.toUpperCase()}`;
    link.setAttribute('download', `mlp-magic-gpus.${format}`);
  }
  return [csv, json];
}

/** The GPU section of the panel. */
export class GpuSection {
  constructor(private _history: GpuHistory) {
    this.node = el('div', 'jp-MlpLive-gpuSection');
    const toolbar = el('div', 'jp-MlpLive-gpuToolbar');
    this._modeButton = el('button', 'jp-MlpLive-link');
    this._modeButton.type = 'button';
    this._modeButton.addEventListener('click', () => {
      this._mode = this.heatmapShown() ? 'rows' : 'heatmap';
      this._dirty = true;
      this.onChange();
    });
    this._metric = el('select', 'jp-MlpLive-metric');
    this._metric.setAttribute('aria-label', 'heatmap metric');
    for (const [value, label] of HEAT_METRICS) {
      this._metric.append(new Option(label, value));
    }
    this._metric.addEventListener('change', () => {
      this._dirty = true;
      this.onChange();
    });
    toolbar.append(el('h3', 'jp-MlpLive-sectionTitle', 'GPUs'), this._modeButton, this._metric,
      el('span', 'jp-MlpLive-exportLabel', 'history:'), ...exportLinks());
    this._heatmap = new Heatmap(this._history, host => {
      this._picked = this._picked === host ? null : host;
      this._dirty = true;
      this.onChange();
    });
    this._body = el('div', 'jp-MlpLive-gpuBody');
    this.node.append(toolbar, this._body);
    if (typeof IntersectionObserver !== 'undefined') {
      this._observer = new IntersectionObserver(entries => this.seen(entries));
    }
  }

  /** Blocks scrolled into or out of view: one that came into view is drawn now. */
  private seen(entries: IntersectionObserverEntry[]): void {
    let wake = false;
    for (const entry of entries) {
      const block = this._blockOfNode.get(entry.target);
      if (block) {
        wake = wake || (entry.isIntersecting && !block.visible);
        block.visible = entry.isIntersecting;
      }
    }
    if (wake) {
      this._dirty = true;
      this.onChange();
    }
  }

  dispose(): void {
    this._observer?.disconnect();
  }

  readonly node: HTMLElement;
  onChange: () => void = () => undefined;

  /** The heatmap's canvas (tests, benchmarks). */
  get heatmapCanvas(): HTMLCanvasElement {
    return this._heatmap.canvas;
  }

  /**
   * Draw. `docChanged`: the hosts may differ (a document whose hosts are the same array, as when
   * only ranks' states changed, draws nothing); `samplesChanged`: new samples came.
   */
  update(hosts: IHostStatus[], nowS: number, docChanged: boolean, samplesChanged: boolean): void {
    const hostsChanged = docChanged && hosts !== this._drawnHosts;
    if (!hostsChanged && !samplesChanged && !this._dirty) {
      return;
    }
    this._drawnHosts = hosts;
    this._dirty = false;
    const views = hosts.map(h => hostGpuView(h, this._history.latest.get(h.name)));
    const withGpus = views.filter(v => v.gpus.length > 0 || this._history.latest.get(v.host)?.length);
    this._auto = withGpus.length > HEATMAP_ABOVE_HOSTS;
    const heatmap = this.heatmapShown();
    setText(this._modeButton, heatmap ? 'show rows' : 'show heatmap');
    this._metric.hidden = !heatmap;
    this.node.hidden = hosts.length === 0;
    // Hosts no sampler reported on: one line for all of them, not a block each.
    const unknown = views.filter(v => v.state === 'unknown').map(v => v.host);
    const shown: IHostGpuView[] = views.filter(
      v => v.state !== 'unknown' && (!heatmap || v.host === this._picked || v.state === 'nogpu')
    );
    const children: HTMLElement[] = [];
    if (heatmap) {
      const map = heatmapModel(hosts, this._history.latest, this._metric.value as HeatMetric);
      // The heatmap's own box once it is in the section (its container's width), else the section's.
      const width = Math.max(120, this._heatmap.node.clientWidth || (this.node.clientWidth || 280) - 8);
      this._heatmap.draw(map, width, nowS, this._picked);
      children.push(this._heatmap.node);
    }
    const keep = new Set<string>();
    let colors: ISparkColors | null = null;
    const palette = () => (colors = colors || sparkColors(this.node));
    const eager = shown.reduce((n, v) => n + v.gpus.length, 0) <= EAGER_GPUS;
    for (const view of shown) {
      keep.add(view.host);
      const block = this.blockOf(view.host);
      block.update(view, this._history, nowS, eager, palette);
      children.push(block.node);
    }
    if (unknown.length > 0) {
      setText(this._unknown, unknownText(unknown));
      children.push(this._unknown);
    }
    this.forgetAllBut(keep);
    // Re-order only when the list of children differs.
    const current = Array.from(this._body.children);
    if (current.length !== children.length || current.some((node, i) => node !== children[i])) {
      this._body.replaceChildren(...children);
    }
  }

  /** A host's block of rows, made (and watched for visibility) the first time. */
  private blockOf(host: string): HostGpus {
    let block = this._blocks.get(host);
    if (!block) {
      block = new HostGpus(host);
      this._blocks.set(host, block);
      if (this._observer) {
        block.visible = false; // until the observer says
        this._blockOfNode.set(block.node, block);
        this._observer.observe(block.node);
      }
    }
    return block;
  }

  private forgetAllBut(keep: Set<string>): void {
    for (const [host, block] of [...this._blocks]) {
      if (!keep.has(host)) {
        this._observer?.unobserve(block.node);
        this._blocks.delete(host);
      }
    }
  }

  private heatmapShown(): boolean {
    return this._mode === 'heatmap' || (this._mode === 'auto' && this._auto);
  }

  private _unknown = el('div', 'jp-MlpLive-gpuUnknown');
  private _observer: IntersectionObserver | null = null;
  private _blockOfNode = new WeakMap<Element, HostGpus>();
  private _mode: Mode = 'auto';
  private _auto = false;
  private _dirty = false;
  private _picked: string | null = null;
  private _drawnHosts: IHostStatus[] | null = null;
  private _blocks = new Map<string, HostGpus>();
  private _modeButton: HTMLButtonElement;
  private _metric: HTMLSelectElement;
  private _heatmap: Heatmap;
  private _body: HTMLElement;
}
