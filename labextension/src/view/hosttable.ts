/**
 * The hosts of the topology, one row each (host, slots, ranks of a full job, reachable,
 * engines by state, health from the last doctor run): a row is rebuilt only when what it shows
 * changed.
 */
import type { IHostStatus } from '../model/documents';
import { hostRow, IHostRow } from '../model/hosts';
import { el } from './dom';

const REACHABLE_MARK = { yes: '✔', no: '✘', unknown: '?' };
const HEALTH_MARK = { ok: '✔', warning: '!', error: '✘', unknown: '–' };

// [header, tooltip]: short headers keep the table inside the default sidebar width.
const COLUMNS: [string, string][] = [
  ['host', 'host name, in hostfile order'],
  ['slots', 'slots (ranks a full job puts there)'],
  ['ranks', 'ranks of a full job on this host'],
  ['up', 'reachable: a TCP connect to its ssh port answered'],
  ['engines', 'engines of running Worlds, by state'],
  ['health', 'the last mlp-magic doctor run: this host\'s worst finding']
];

function fillRow(tr: HTMLTableRowElement, row: IHostRow): void {
  tr.className = `jp-MlpCluster-host jp-MlpCluster-reachable-${row.reachable}`;
  tr.dataset.host = row.name;
  const cells = [
    el('td', '', row.name),
    el('td', '', row.slots === null ? '' : `${row.slots}`),
    el('td', '', row.ranks),
    el('td', 'jp-MlpCluster-reachableCell', REACHABLE_MARK[row.reachable]),
    el('td', 'jp-MlpCluster-engines', row.engines || '–'),
    el('td', `jp-MlpCluster-health jp-MlpCluster-health-${row.health}`, HEALTH_MARK[row.health])
  ];
  cells[3].title = row.reachableDetail;
  cells[5].title = row.healthDetail;
  tr.replaceChildren(...cells);
}

export class HostTable {
  constructor() {
    this.node = el('table', 'jp-MlpCluster-hosts');
    const head = this.node.createTHead().insertRow();
    for (const [title, tooltip] of COLUMNS) {
      const th = el('th', '', title);
      th.title = tooltip;
      head.appendChild(th);
    }
    this._body = this.node.createTBody();
  }

  readonly node: HTMLTableElement;

  /** ``states``: each rank's state by "<world pid>/<rank>" (model.rankStatesOf). */
  update(hosts: IHostStatus[], states: Map<string, string>): void {
    const rows: HTMLTableRowElement[] = [];
    const next = new Map<string, { tr: HTMLTableRowElement; signature: string }>();
    for (const host of hosts) {
      const row = hostRow(host, states);
      const signature = JSON.stringify(row);
      let drawn = this._rows.get(row.name);
      if (!drawn || next.has(row.name)) {
        drawn = { tr: document.createElement('tr'), signature: '' };
      }
      if (drawn.signature !== signature) {
        fillRow(drawn.tr, row);
        drawn.signature = signature;
      }
      next.set(row.name, drawn);
      rows.push(drawn.tr);
    }
    this._rows = next;
    const current = Array.from(this._body.rows);
    if (current.length !== rows.length || current.some((tr, i) => tr !== rows[i])) {
      this._body.replaceChildren(...rows);
    }
  }

  private _rows = new Map<string, { tr: HTMLTableRowElement; signature: string }>();
  private _body: HTMLTableSectionElement;
}
