import { LabIcon } from '@jupyterlab/ui-components';

// Three linked nodes: the cluster's hosts.
const clusterSvg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="9" y="2" width="6" height="5" rx="1"/>
    <rect x="2" y="16" width="6" height="5" rx="1"/>
    <rect x="16" y="16" width="6" height="5" rx="1"/>
    <path d="M11.25 7h1.5v4.25H19.75V16h-1.5v-3.25H5.75V16h-1.5v-4.75h7z"/>
  </g>
</svg>`;

export const clusterIcon = new LabIcon({
  name: 'mlp-magic:cluster',
  svgstr: clusterSvg
});
