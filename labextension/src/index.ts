import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

import { ClusterPanel } from './panel';

/**
 * Adds the "MLP Cluster" panel to the left sidebar.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'mlp-magic:cluster-panel',
  description: 'A left-sidebar panel with the hosts, ranks, engines and GPUs of the mlp_magic cluster.',
  autoStart: true,
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
    const panel = new ClusterPanel();
    app.shell.add(panel, 'left', { rank: 900 });
    if (restorer) {
      restorer.add(panel, panel.id);
    }
  }
};

export default plugin;
