/**
 * The plain page GET {base_url}mlp-magic/dashboard (and `mlp-magic dashboard`): the same
 * ClusterPanel as JupyterLab's, attached to the page's body, fed by the same websocket. Built by
 * esbuild into mlp_magic/panel/static/ (package.json's build:dashboard), with the CSS it needs
 * that JupyterLab would otherwise give: the light theme's --jp-* variables, Lumino's and the
 * dialogs' styles.
 */
import '@lumino/widgets/style/index.css';
import '@jupyterlab/ui-components/style/base.css';
import '@jupyterlab/apputils/style/base.css';
import '@jupyterlab/theme-light-extension/style/variables.css';
import '../style/index.css';

import { PageConfig } from '@jupyterlab/coreutils';
import { Widget } from '@lumino/widgets';

import { useServerSettings } from './live/routes';
import { ClusterPanel } from './view/panel';

function main(): void {
  // The page was opened with ?token=: the socket says it too (a login cookie may not be kept).
  if (PageConfig.getToken()) {
    useServerSettings({ appendToken: true });
  }
  // No JupyterLab: no commands (the panel says so where it would insert a snippet).
  const panel = new ClusterPanel({ commands: null });
  panel.addClass('jp-MlpDashboard-panel');
  document.body.classList.add('jp-MlpDashboard');
  Widget.attach(panel, document.body);
}

main();
