// Notices: short messages at the top of the page (storage trouble, targets reached, import errors).
import { html, render } from './html.js';

/**
 * Wire the notice area; returns `notify(message, {tone, sticky, key})`.
 * A notice with a `key` replaces the one shown under the same key, so a state that changes
 * (progress not saved, then saved again) reads as one line, never a pile.
 */
export function registerNotices(root) {
  let seq = 0;
  return function notify(message, { tone = 'info', sticky = false, key = '' } = {}) {
    const id = `notice-${++seq}`;
    const item = document.createElement('div');
    item.className = `notice ${tone}`;
    item.id = id;
    if (key) item.dataset.noticeKey = key;
    render(item, html`<p>${message}</p><button type="button" class="dismiss" aria-label="dismiss">×</button>`);
    item.querySelector('button').addEventListener('click', () => item.remove());
    const earlier = key && [...root.children].find((el) => el.dataset.noticeKey === key);
    if (earlier) earlier.replaceWith(item);
    else root.append(item);
    if (!sticky) setTimeout(() => item.remove(), 6000);
    return item;
  };
}
