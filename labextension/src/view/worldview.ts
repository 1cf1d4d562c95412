/**
 * One World in the panel: its summary line, the running cell, the stragglers, the actions
 * (Interrupt, Unblock, Restart, Stacks now, Tail, Copy snippet) and its ranks by host: rows with
 * text up to 16 ranks, a grid of cells above (view/rankgrid.ts, beside the text when wide).
 */
import { Clipboard, Dialog, Sanitizer, showDialog } from '@jupyterlab/apputils';
import type { CommandRegistry } from '@lumino/commands';

import {
  errorText,
  interruptWorld,
  LogStream,
  rankLog,
  restartWorld,
  unblockWorld,
  worldStacks
} from '../live/routes';
import type { IWorld } from '../model/documents';
import { foldRanks, interruptText, rankList, unblockText } from '../model/format';
import { showsGrid } from '../model/grid';
import { lastLineOf, stragglerLine } from '../model/gridtext';
import {
  cellLine,
  gridSummaryLine,
  highlightedRanks,
  IStraggler,
  lastProfile,
  snippetFor,
  stragglerText,
  stragglers,
  orphaned,
  summaryLine,
  worldKey,
  worldTitle
} from '../model/worlds';
import { actionButton, el, setText } from './dom';
import { RankGrid } from './rankgrid';
import { RankList } from './ranklist';

/** JupyterLab's command that puts text in the active notebook cell (at its selection). */
export const INSERT_COMMAND = 'notebook:replace-selection';

const RESTART_BODY =
  'Restart stops every rank of this World now; the next %%mpirun cell starts a fresh one. ' +
  "The ranks' variables are lost.";
const STOP_BODY =
  'This World is kept with no kernel (`%mpirun --attach` in a notebook takes it up). ' +
  "Stop ends every rank now; the ranks' variables are lost.";

const sanitizer = new Sanitizer();

/** The World's action buttons, in the order shown. */
function worldButtons(): HTMLButtonElement[] {
  return [
    actionButton('interrupt', 'Interrupt', "Interrupt this World's running cell on every rank (SIGINT)"),
    actionButton(
      'unblock',
      'Unblock',
      'End the hung torch.distributed collectives of the busy ranks, keeping every process and its state'
    ),
    actionButton('restart', 'Restart', 'Stop every rank of this World; the next %%mpirun cell starts a fresh one'),
    actionButton('stacks', 'Stacks now', "Every rank's Python stack now, merged into one tree"),
    actionButton('tail', 'Tail', "The last lines of a rank's output (the selected rank, else the first highlighted)")
  ];
}

/** A rank's last output line, for the grid's tooltip: its stdout log's last line, else stderr's. */
async function lastWrittenLine(worldId: string, rank: number): Promise<string> {
  const out = lastLineOf(await rankLog(worldId, rank, 'stdout'));
  return out || lastLineOf(await rankLog(worldId, rank, 'stderr'));
}

/** The last profile, folded: its title, and the report under it. */
function profileBox(): HTMLElement {
  const box = el('details', 'jp-MlpLive-profile');
  box.append(el('summary'), el('pre'));
  return box;
}

export class WorldView {
  constructor(
    world: IWorld,
    private _commands: CommandRegistry | null
  ) {
    this.key = worldKey(world);
    this.node = el('div', 'jp-MlpLive-world');
    this.node.dataset.worldId = this.key;
    this._title = el('div', 'jp-MlpLive-worldTitle');
    this._summary = el('div', 'jp-MlpLive-summary');
    this._cell = el('div', 'jp-MlpLive-cell');
    this._stragglers = el('div', 'jp-MlpLive-stragglers');
    this._profile = profileBox();
    this._message = el('div', 'jp-MlpLive-message');
    this._snippet = el('code', 'jp-MlpLive-snippetText');
    this._selection = el('span', 'jp-MlpLive-selection');
    this._output = el('div', 'jp-MlpLive-output');
    this._ranks = new RankList(rank => this.toggle(rank));
    this._grid = new RankGrid(selected => this.select(selected), rank => lastWrittenLine(this.key, rank));

    const actions = el('div', 'jp-MlpLive-actions');
    this._buttons = worldButtons();
    actions.append(...this._buttons);
    const snippetRow = this.snippetRow();
    const clear = el('button', 'jp-MlpLive-link', 'clear');
    clear.type = 'button';
    clear.addEventListener('click', () => {
      this._selected.clear();
      this.onChange();
    });
    this._selection.append(el('span'), clear);

    // The World's text and actions, and beside them (a wide tab) or under them its grid (CSS).
    const main = el('div', 'jp-MlpLive-worldMain');
    main.append(
      this._title,
      this._summary,
      this._cell,
      this._stragglers,
      this._profile,
      actions,
      snippetRow,
      this._selection,
      this._message,
      this._output,
      this._ranks.node
    );
    this.node.append(main, this._grid.node);
    this.listenToButtons();
    this._world = world;
  }

  /** The snippet for the highlighted ranks, and its Copy and Insert buttons. */
  private snippetRow(): HTMLElement {
    const copy = actionButton('snippet', 'Copy snippet', 'Copy this line to the clipboard, to paste in a notebook cell');
    const insert = actionButton('insert-snippet', 'Insert', 'Put this line in the active notebook cell');
    const row = el('div', 'jp-MlpLive-snippet');
    row.append(this._snippet, copy, insert);
    return row;
  }

  /** One listener for every button[data-action] of the World. */
  private listenToButtons(): void {
    const handlers: { [action: string]: () => void } = {
      interrupt: () => void this.interrupt(),
      unblock: () => void this.unblock(),
      restart: () => void this.restart(),
      stacks: () => void this.stacks(),
      tail: () => this.openTail(),
      snippet: () => this.copySnippet(),
      'insert-snippet': () => void this.insertSnippet()
    };
    this.node.addEventListener('click', event => {
      const button = (event.target as HTMLElement).closest('button[data-action]') as HTMLButtonElement | null;
      if (button && this.node.contains(button) && handlers[button.dataset.action || '']) {
        handlers[button.dataset.action as string]();
      }
    });
  }

  readonly key: string;
  readonly node: HTMLElement;

  /** Called when the user changes something that needs a redraw (a selection). */
  onChange: () => void = () => undefined;

  /** How many rank and host rows exist in the DOM now. */
  get drawnRows(): number {
    return this._ranks.drawnCount;
  }

  /** Draw the World as of `nowMs` (the server's clock). */
  update(world: IWorld, nowMs: number): void {
    this._world = world;
    const found: IStraggler[] = stragglers(world, nowMs);
    const ranks = world.ranks || [];
    const present = new Set(ranks.map(r => r.rank));
    for (const r of [...this._selected]) {
      if (!present.has(r)) {
        this._selected.delete(r);
      }
    }
    setText(this._title, worldTitle(world));
    const grid = showsGrid(ranks.length);
    // A grid World says it all in one line: its cell is in the summary, its stragglers outlined.
    setText(this._summary, grid ? gridSummaryLine(world, nowMs) : summaryLine(world, nowMs));
    const cell = cellLine(world, nowMs);
    this._cell.hidden = cell === null || grid;
    if (cell) {
      setText(this._cell, `▶ ${cell.firstLine}${cell.on ? ` (${cell.on})` : ''} · ${cell.elapsed || '?'}`);
      this._cell.title = `the running cell, started ${cell.elapsed} ago`;
    }
    this._stragglers.hidden = found.length === 0;
    setText(this._stragglers, grid ? stragglerLine(found.map(s => s.rank)) : stragglerText(found));
    const profile = lastProfile(world, nowMs);
    this._profile.hidden = profile === null;
    if (profile) {
      setText(this._profile.firstChild as HTMLElement, profile.title);
      setText(this._profile.lastChild as HTMLElement, profile.text);
    }
    this._highlighted = highlightedRanks(world, [...this._selected], found, nowMs);
    setText(this._snippet, snippetFor(this._highlighted));
    this._selection.hidden = this._selected.size === 0;
    setText(this._selection.firstChild as HTMLElement, `selected: ${rankList([...this._selected])} `);
    const actionable = !!world.id && world.state !== 'stopped';
    this.nameRestart(orphaned(world));
    for (const button of this._buttons) {
      button.disabled = !actionable;
      if (!world.id) {
        button.title = 'This server does not name its Worlds: update mlp_magic on the server for actions';
      }
    }
    const marks = { stragglers: new Map(found.map(s => [s.rank, s.reason])), selected: this._selected };
    this._ranks.node.hidden = grid;
    this._grid.node.hidden = !grid;
    (grid ? this._grid : this._ranks).update(ranks, marks, nowMs);
  }

  /** The grid's selection replaces the World's. */
  private select(selected: Set<number>): void {
    this._selected = new Set(selected);
    this.onChange();
  }

  private toggle(rank: number): void {
    if (!this._selected.delete(rank)) {
      this._selected.add(rank);
    }
    this.onChange();
  }

  private say(text: string, error = false): void {
    this._message.textContent = text;
    this._message.classList.toggle('jp-mod-error', error);
  }

  private async run(what: string, action: () => Promise<string>): Promise<void> {
    this.say(`${what}…`);
    try {
      this.say(await action());
    } catch (error) {
      this.say(`${what} failed: ${errorText(error)}`, true);
    }
  }

  private async interrupt(): Promise<void> {
    const id = this.key;
    await this.run('Interrupting', async () => interruptText(await interruptWorld(id)));
  }

  private async unblock(): Promise<void> {
    const id = this.key;
    await this.run('Unblocking', async () => unblockText(await unblockWorld(id)));
  }

  /** A kept World with no kernel has nothing to restart it: its Restart says Stop. */
  private nameRestart(stop: boolean): void {
    const button = this._buttons.find(b => b.dataset.action === 'restart');
    if (button) {
      button.textContent = stop ? 'Stop' : 'Restart';
      button.title = stop
        ? 'Stop every rank of this kept World (no kernel drives it)'
        : 'Stop every rank of this World; the next %%mpirun cell starts a fresh one';
    }
  }

  private async restart(): Promise<void> {
    const stop = orphaned(this._world);
    const verb = stop ? 'Stop' : 'Restart';
    const result = await showDialog({
      title: `${verb} ${worldTitle(this._world)}?`,
      body: stop ? STOP_BODY : RESTART_BODY,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: verb })]
    });
    if (!result.button.accept) {
      return;
    }
    const id = this.key;
    await this.run(stop ? 'Stopping' : 'Restarting', async () => {
      // The answer counts the processes stopped (model/answers.ts); the person needs what comes next.
      await restartWorld(id);
      return stop ? 'The World was stopped.' : 'The World was stopped; the next %%mpirun cell starts a fresh one.';
    });
  }

  private async stacks(): Promise<void> {
    const id = this.key;
    await this.run('Taking the stacks', async () => {
      const answer = await worldStacks(id);
      const body = el('div', 'jp-MlpLive-stacks');
      if (answer.html) {
        // Server data as HTML only through JupyterLab's sanitiser.
        body.innerHTML = sanitizer.sanitize(answer.html);
      } else {
        body.append(el('pre', '', answer.text || '(no stacks)'));
      }
      this.showOutput(`Stacks at ${new Date().toLocaleTimeString()}`, body);
      return '';
    });
  }

  private openTail(): void {
    const form = el('div', 'jp-MlpLive-tailForm');
    const rank = el('input', 'jp-MlpLive-tailRank');
    rank.type = 'number';
    rank.min = '0';
    rank.value = String(this._highlighted[0] ?? [...this._selected][0] ?? 0);
    rank.setAttribute('aria-label', 'rank');
    const stream = el('select', 'jp-MlpLive-tailStream');
    for (const name of ['stdout', 'stderr']) {
      stream.append(new Option(name, name));
    }
    const show = el('button', 'jp-mod-styled', 'Show');
    show.type = 'button';
    const text = el('pre', 'jp-MlpLive-tailText');
    form.append(el('span', '', 'rank '), rank, stream, show);
    const body = el('div');
    body.append(form, text);
    const load = () => void this.tail(Number(rank.value), stream.value as LogStream, text);
    show.addEventListener('click', load);
    rank.addEventListener('keydown', event => event.key === 'Enter' && load());
    stream.addEventListener('change', load);
    this.showOutput('Tail', body);
    load();
  }

  private async tail(rank: number, stream: LogStream, into: HTMLElement): Promise<void> {
    const id = this.key;
    into.textContent = '…';
    try {
      const text = await rankLog(id, rank, stream);
      into.textContent = text || `(rank ${rank} wrote nothing to ${stream} in this World's last cell)`;
      into.scrollTop = into.scrollHeight;
      into.classList.remove('jp-mod-error');
    } catch (error) {
      into.textContent = `Cannot read rank ${rank}'s ${stream}: ${errorText(error)}`;
      into.classList.add('jp-mod-error');
    }
  }

  private showOutput(title: string, body: HTMLElement): void {
    const head = el('div', 'jp-MlpLive-outputHead');
    const close = el('button', 'jp-MlpLive-link', 'close');
    close.type = 'button';
    close.addEventListener('click', () => this._output.replaceChildren());
    head.append(el('span', '', title), close);
    this._output.replaceChildren(head, body);
  }

  private snippet(): string {
    return snippetFor(this._highlighted);
  }

  private copySnippet(): void {
    const text = this.snippet();
    Clipboard.copyToSystem(text);
    this.say(`Copied: ${text}`);
  }

  private async insertSnippet(): Promise<void> {
    const text = this.snippet();
    const commands = this._commands;
    if (!commands || !commands.hasCommand(INSERT_COMMAND) || !commands.isEnabled(INSERT_COMMAND, { text })) {
      this.say('Open a notebook and select a cell first (or use Copy snippet).', true);
      return;
    }
    try {
      await commands.execute(INSERT_COMMAND, { text });
      this.say(`Inserted: ${text}`);
    } catch (error) {
      this.say(`Cannot insert: ${errorText(error)}`, true);
    }
  }

  /** The ranks the snippet and Tail are for (tests). */
  get highlighted(): string {
    return foldRanks(this._highlighted);
  }

  private _world: IWorld;
  private _selected = new Set<number>();
  private _highlighted: number[] = [];
  private _buttons: HTMLButtonElement[];
  private _title: HTMLElement;
  private _summary: HTMLElement;
  private _cell: HTMLElement;
  private _profile: HTMLElement;
  private _stragglers: HTMLElement;
  private _message: HTMLElement;
  private _snippet: HTMLElement;
  private _selection: HTMLElement;
  private _output: HTMLElement;
  private _ranks: RankList;
  private _grid: RankGrid;
}
