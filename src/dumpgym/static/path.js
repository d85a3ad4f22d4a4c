// The path: chapters whose targets tick themselves off when a streak first reaches them.

/** Where a target's notice goes: under the feedback of its drill when that drill is on screen, else the page's notices. */
function noticeSpot(drill) {
  const panel = document.getElementById(`drill-${drill}`);
  return panel && !panel.hidden ? panel.querySelector('[data-feedback]') : null;
}

/** Wire the path section and the streak summary to the progress store. */
export function registerPath(root, summary, progress, notify) {
  const targets = [...root.querySelectorAll('[data-target]')];
  const chips = [...summary.querySelectorAll('[data-summary-streak]')];

  function update(announce) {
    const reached = [];  // one notice for every target this change reached, never a pile
    for (const el of targets) {
      const { target, drill } = el.dataset;
      const need = Number(el.dataset.streak);
      const { current, best } = progress.streak(drill);
      if (!progress.reached(target) && best >= need) {
        progress.markReached(target);
        const name = el.querySelector('a').textContent.trim().replace(/\s+/g, ' ');
        reached.push({ drill, text: `chapter ${target.slice(0, 2)}, ${name}, ${need} in a row` });
      }
      const done = progress.reached(target);
      el.toggleAttribute('data-reached', done);
      el.querySelector('[data-target-state]').textContent =
        done ? 'reached' : current ? `now ${current} · best ${best}` : best ? `best ${best}` : 'not yet';
    }
    if (announce && reached.length) {
      const what = reached.length === 1 ? 'Target reached' : `${reached.length} targets reached`;
      notify(`${what}: ${reached.map((r) => r.text).join('; ')}.`,
        { tone: 'good', key: 'target', near: noticeSpot(reached[0].drill) });
    }
    for (const chip of chips) {
      const { current, best } = progress.streak(chip.dataset.summaryStreak);
      chip.textContent = best ? `${current} · best ${best}` : `${current}`;
    }
  }

  progress.addEventListener('change', (e) => { if (!e.detail.reached) update(true); });
  update(false);
}
