import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { ClusterPanel } from './view/panel';

/**
 * Adds the "MLP Cluster" panel to the left sidebar.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'mlp-magic:cluster-panel',
  description:
    "A left-sidebar panel with the mlp_magic cluster live: every World's ranks, every host's GPUs, and actions.",
  autoStart: true,
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
    const panel = new ClusterPanel({ commands: app.commands });
    app.shell.add(panel, 'left', { rank: 900 });
    if (restorer) {
      restorer.add(panel, panel.id);
    }
  }
};

export default plugin;
