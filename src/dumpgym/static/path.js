// The path: chapters whose targets tick themselves off when a streak first reaches them.

/** Wire the path section and the streak summary to the progress store. */
export function registerPath(root, summary, progress, notify) {
  const targets = [...root.querySelectorAll('[data-target]')];
  const chips = [...summary.querySelectorAll('[data-summary-streak]')];

  function update(announce) {
    for (const el of targets) {
      const { target, drill } = el.dataset;
      const need = Number(el.dataset.streak);
      const { current, best } = progress.streak(drill);
      if (!progress.reached(target) && best >= need) {
        progress.markReached(target);
        if (announce) {
          const name = el.querySelector('a').textContent.trim();
          notify(`Target reached: chapter ${target.slice(0, 2)}, ${name}, ${need} in a row.`, { tone: 'good' });
        }
      }
      const done = progress.reached(target);
      el.toggleAttribute('data-reached', done);
      el.querySelector('[data-target-state]').textContent =
        done ? 'reached' : current ? `now ${current} · best ${best}` : best ? `best ${best}` : 'not yet';
    }
    for (const chip of chips) {
      const { current, best } = progress.streak(chip.dataset.summaryStreak);
      chip.textContent = best ? `${current} · best ${best}` : `${current}`;
    }
  }

  progress.addEventListener('change', (e) => { if (!e.detail.reached) update(true); });
  update(false);
}
