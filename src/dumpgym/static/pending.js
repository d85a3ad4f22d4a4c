// While `dumpgym serve` makes the drill items it had not kept (the first start after an add or an upgrade),
// the drills section says so (the page's note); this asks the server whose items are still pending and,
// once none are, reloads the page, which then holds them all. A learner who has started answering keeps
// the question: the note turns into a reload button instead.
import { html, render } from './html.js';

const EVERY = 2000;  // ms between asks: the making takes seconds, one ask costs a few bytes

/** Wire the note `[data-drills-pending]` (absent when every program's items were there at once). */
export function registerPending(note, { every = EVERY } = {}) {
  if (!note) return;
  let touched = false;
  for (const type of ['pointerdown', 'keydown']) {
    document.addEventListener(type, () => { touched = true; }, { capture: true, once: true });
  }
  const ask = async () => {
    let pending;
    try {
      const r = await fetch(note.dataset.drillsPending, { cache: 'no-store' });
      pending = r.ok ? (await r.json()).pending : null;
    } catch {
      pending = null;  // the server is busy or restarting: ask again
    }
    if (pending === null || pending.length) {
      setTimeout(ask, every);
    } else if (!touched) {
      location.reload();
    } else {
      render(note, html`Every program's drill items are ready. <button type="button" data-reload>reload the page to drill them all</button>`);
      note.querySelector('[data-reload]').addEventListener('click', () => location.reload());
    }
  };
  setTimeout(ask, every);
}
