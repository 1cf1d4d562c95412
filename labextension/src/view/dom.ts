/**
 * Small DOM helpers for the panel's views (text only: server data never goes in as HTML).
 */

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** A button with its stable hook: button[data-action="..."]. */
export function actionButton(action: string, label: string, title: string): HTMLButtonElement {
  const button = el('button', 'jp-MlpLive-action jp-mod-styled', label);
  button.type = 'button';
  button.dataset.action = action;
  button.title = title;
  return button;
}

/** Sets a node's text only when it differs (no needless DOM writes). */
export function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}

/** Sets an attribute only when it differs. */
export function setAttr(node: HTMLElement, name: string, value: string): void {
  if (node.getAttribute(name) !== value) {
    node.setAttribute(name, value);
  }
}

/** A horizontal bar: a fill of `fraction` (null: empty) and a text over it. */
export function bar(kind: string): { node: HTMLElement; set(fraction: number | null, text: string): void } {
  const node = el('div', `jp-MlpCluster-bar jp-MlpCluster-bar-${kind}`);
  const fill = el('div', 'jp-MlpCluster-barFill');
  const label = el('span', 'jp-MlpCluster-barText');
  node.append(fill, label);
  let last = '';
  return {
    node,
    set(fraction: number | null, text: string): void {
      const width = `${Math.round((fraction ?? 0) * 100)}%`;
      const key = `${width}|${text}`;
      if (key !== last) {
        last = key;
        fill.style.width = width;
        label.textContent = text;
        node.title = text;
      }
    }
  };
}

/** A canvas sized for the device's pixels; returns its 2D context scaled to CSS pixels. */
export function sizeCanvas(
  canvas: HTMLCanvasElement,
  width: number,
  height: number
): CanvasRenderingContext2D | null {
  const ratio = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(width * ratio));
  const h = Math.max(1, Math.round(height * ratio));
  if (canvas.width !== w || canvas.height !== h) {
    canvas.width = w;
    canvas.height = h;
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
  }
  const context = canvas.getContext('2d');
  context?.setTransform(ratio, 0, 0, ratio, 0, 0);
  return context;
}
