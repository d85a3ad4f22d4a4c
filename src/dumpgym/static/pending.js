// While `dumpgym serve` makes the drill items it had not kept (the first start after an add or an upgrade),
// the drills section says so (the page's note); this asks the server whose items are still pending and
// reloads the page, which then holds them, once none are, or as soon as some are if the page had no drill
// to show. A learner who has started answering keeps the question: the note offers a reload instead.
import { html, render } from './html.js';

const EVERY = 2000;  // ms between asks: the making takes seconds, one ask costs a few bytes

/** Wire the note `[data-drills-pending]` (absent when every program's items were there at once). */
export function registerPending(note, { every = EVERY } = {}) {
  if (!note) return;
  const before = Number(note.dataset.pendingCount);
  let touched = false;
  for (const type of ['pointerdown', 'keydown']) {
    document.addEventListener(type, () => { touched = true; }, { capture: true, once: true });
  }
  const ask = async () => {
    let pending = null;
    try {
      const r = await fetch(note.dataset.drillsPending, { cache: 'no-store' });
      if (r.ok) pending = (await r.json()).pending;
    } catch {
      // the server is busy or gone: ask again
    }
    const drillless = !document.querySelector('[data-drill-tab]');
    if (pending === null || (pending.length && !(drillless && pending.length < before))) {
      setTimeout(ask, every);
    } else if (!touched) {
      location.reload();
    } else if (pending.length) {
      setTimeout(ask, every);
    } else {
      render(note, html`Every program's drill items are ready. <button type="button" data-reload>reload the page to drill them all</button>`);
      note.querySelector('[data-reload]').addEventListener('click', () => location.reload());
    }
  };
  setTimeout(ask, every);
}
