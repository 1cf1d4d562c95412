import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';

import { dashboardUrl } from './live/routes';
import { ClusterPanel } from './view/panel';

export const OPEN_COMMAND = 'mlp-magic:open-dashboard';
/** The main-area tab's panel id (the sidebar's is ClusterPanel's own). */
export const TAB_PANEL_ID = 'mlp-magic-cluster-tab';

type Tab = MainAreaWidget<ClusterPanel>;

/** JupyterLab: one main-area tab of a second ClusterPanel, reused while open. */
function tabOpener(app: JupyterFrontEnd, tracker: WidgetTracker<Tab>): () => Tab {
  return () => {
    let tab = tracker.currentWidget;
    if (!tab || tab.isDisposed) {
      const panel = new ClusterPanel({ commands: app.commands });
      panel.id = TAB_PANEL_ID;
      tab = new MainAreaWidget({ content: panel });
      tab.id = 'mlp-magic-cluster-main';
      tab.title.label = 'MLP Cluster';
      tab.title.icon = panel.title.icon;
      tab.title.closable = true;
      void tracker.add(tab);
      app.shell.add(tab, 'main');
    }
    app.shell.activateById(tab.id);
    return tab;
  };
}

/**
 * The "MLP Cluster" panel in the left sidebar, and a command that opens the same view wide: in a
 * JupyterLab main-area tab, or (Notebook 7, whose main area holds only its page) the plain
 * dashboard page in a new browser tab. ILabShell is optional: Notebook 7 has none.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'mlp-magic:cluster-panel',
  description:
    "A left-sidebar panel with the mlp_magic cluster live: every World's ranks, every host's GPUs, and actions.",
  autoStart: true,
  optional: [ILayoutRestorer, ILabShell, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    labShell: ILabShell | null,
    palette: ICommandPalette | null
  ) => {
    const tracker = new WidgetTracker<Tab>({ namespace: 'mlp-magic-tab' });
    const openTab = tabOpener(app, tracker);
    app.commands.addCommand(OPEN_COMMAND, {
      label: 'Open MLP Cluster in a tab',
      caption: 'The live cluster view, wide',
      execute: () => {
        if (labShell) {
          return openTab();
        }
        window.open(dashboardUrl(), '_blank');
        return null;
      }
    });
    palette?.addItem({ command: OPEN_COMMAND, category: 'MLP Magic' });
    const panel = new ClusterPanel({
      commands: app.commands,
      openInTab: () => void app.commands.execute(OPEN_COMMAND)
    });
    app.shell.add(panel, 'left', { rank: 900 });
    if (restorer) {
      restorer.add(panel, panel.id);
      if (labShell) {
        void restorer.restore(tracker, { command: OPEN_COMMAND, name: () => 'mlp-magic-tab' });
      }
    }
  }
};

export default plugin;
