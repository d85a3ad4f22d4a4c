// Notices: short messages in the flow of the page (storage trouble, targets reached, import errors),
// never floating over it. One live region at the top holds the page's; a notice about an answer sits
// right under that answer's feedback, and goes with the question.
import { html, render } from './html.js';

/**
 * Wire the notice area; returns `notify(message, {tone, sticky, key, near})`.
 * A notice with a `key` replaces the one shown under the same key, so a state that changes
 * (progress not saved, then saved again) reads as one line, never a pile. With `near` (an element),
 * the notice goes right after it in the page instead of the top region, and stays until removed.
 */
export function registerNotices(root) {
  let seq = 0;
  return function notify(message, { tone = 'info', sticky = false, key = '', near = null } = {}) {
    const id = `notice-${++seq}`;
    const item = document.createElement('div');
    item.className = `notice ${tone}`;
    item.id = id;
    if (key) item.dataset.noticeKey = key;
    render(item, html`<p>${message}</p><button type="button" class="dismiss" aria-label="dismiss">×</button>`);
    item.querySelector('button').addEventListener('click', () => item.remove());
    const earlier = !key ? null : document.querySelector(`.notice[data-notice-key="${CSS.escape(key)}"]`);
    if (near) {
      item.setAttribute('role', 'status');  // outside the page's live region: its own, polite
      earlier?.remove();
      near.after(item);
      return item;
    }
    if (earlier && root.contains(earlier)) earlier.replaceWith(item);
    else { earlier?.remove(); root.append(item); }
    if (!sticky) setTimeout(() => item.remove(), 6000);
    return item;
  };
}
