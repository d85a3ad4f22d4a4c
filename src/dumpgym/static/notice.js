// Notices: short messages at the top of the page (storage trouble, targets reached, import errors).
import { html, render } from './html.js';

/** Wire the notice area; returns `notify(message, {tone, sticky})`. */
export function registerNotices(root) {
  let seq = 0;
  return function notify(message, { tone = 'info', sticky = false } = {}) {
    const id = `notice-${++seq}`;
    const item = document.createElement('div');
    item.className = `notice ${tone}`;
    item.id = id;
    render(item, html`<p>${message}</p><button type="button" class="dismiss" aria-label="dismiss">×</button>`);
    item.querySelector('button').addEventListener('click', () => item.remove());
    root.append(item);
    if (!sticky) setTimeout(() => item.remove(), 6000);
    return item;
  };
}
