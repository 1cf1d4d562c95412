import './base.css';
import './grid.css';
import './heatmap.css';
import './frontends.css';
