// The path: chapters whose targets tick themselves off when a streak first reaches them, a "next" that
// says what to do now, and where the learner stands.
import { html, plural, render } from './html.js';
import { isDue } from './schedule.js';
import { resolveContext } from './context.js';

/** Show a step's worked example when it is opened: its context resolved from the listings, as a drill's is. */
function showExample(details) {
  const box = details.querySelector('[data-example-blocks]');
  if (box.dataset.state) return;
  box.dataset.state = 'loading';
  resolveContext(details.dataset.exampleProgram, JSON.parse(details.dataset.exampleContext))
    .then((blocks) => {
      render(box, html`${blocks.map((block) => html`<pre class="eqn shown" data-shown>${block}</pre>`)}`);
      box.dataset.state = 'shown';
    })
    .catch((e) => {
      render(box, html`<p class="empty">Could not load the example's listing (${e.message}).</p>`);
      box.dataset.state = 'failed';
    });
}

/** Where a target's notice goes: under the feedback of its drill when that drill is on screen, else the page's notices. */
function noticeSpot(drill) {
  const panel = document.getElementById(`drill-${drill}`);
  return panel && !panel.hidden ? panel.querySelector('[data-feedback]') : null;
}

/** A drill kind's title as its tab says it. */
const titleOf = (drill) => document.getElementById(`tab-${drill}`)?.textContent.trim().replace(/\s+/g, ' ') ?? drill;

/**
 * The review to do first when any is due: the drill of the most overdue due card among `drills`, and how
 * many cards are due there; null when none is.
 */
export function mostOverdue(cards, drills, now = Date.now()) {
  let oldest = null;
  const counts = new Map();
  for (const [family, card] of Object.entries(cards)) {
    const drill = family.slice(0, family.indexOf('/'));
    if (!drills.has(drill) || !isDue(family, card, now)) continue;
    counts.set(drill, (counts.get(drill) ?? 0) + 1);
    if (!oldest || Date.parse(card.due) < Date.parse(oldest.due)) oldest = { drill, due: card.due };
  }
  return oldest && { drill: oldest.drill, count: counts.get(oldest.drill) };
}

/** Wire the path section and the streak summary to the progress store. */
export function registerPath(root, summary, progress, notify) {
  const targets = [...root.querySelectorAll('[data-target]')];
  const chapters = [...root.querySelectorAll('[data-chapter]')];
  const chips = [...summary.querySelectorAll('[data-summary-streak]')];
  const next = root.querySelector('[data-next]');
  const nextWhat = root.querySelector('[data-next-what]');
  const standing = root.querySelector('[data-path-standing]');
  // The drills this page can open (a target in a kind without items has no link).
  const open = new Set(targets.filter((el) => el.querySelector('a')).map((el) => el.dataset.drill));

  const labelOf = (el) => el.closest('[data-chapter]').dataset.chapterLabel;
  // A target in a kind without items names its kind (it has no link, and can still be reached by an
  // imported record's streaks).
  const nameOf = (el) => el.querySelector('a')?.textContent.trim().replace(/\s+/g, ' ') ?? el.dataset.drill;

  /** Point "next" at the most overdue review, else the first target not reached, in path order. */
  function showNext(unmet) {
    if (!next) return;
    const review = mostOverdue(progress.cards(), open);
    let drill;
    if (review) {
      drill = review.drill;
      next.dataset.next = 'review';
      nextWhat.textContent = `review ${titleOf(drill)}: ${plural(review.count, 'question')} due`;
    } else if (unmet) {
      drill = unmet.dataset.drill;
      const { current, best } = progress.streak(drill);
      next.dataset.next = 'target';
      nextWhat.textContent = `${labelOf(unmet)}: ${nameOf(unmet)}, ${unmet.dataset.streak} in a row${
        best ? ` (now ${current} · best ${best})` : ''}`;
    } else {
      drill = next.dataset.openDrill;
      next.dataset.next = 'done';
      nextWhat.textContent = 'every target is reached: keep your streaks, and come back when reviews fall due';
    }
    next.dataset.openDrill = drill;
    next.setAttribute('href', `#drill-${drill}`);
  }

  /** Mark each chapter done, here (the one "next" works in) or ahead, and sum it up. */
  function showStanding(unmet) {
    const here = unmet?.closest('[data-chapter]');
    let done = 0;
    for (const ch of chapters) {
      const all = [...ch.querySelectorAll('[data-target]')].every((el) => el.hasAttribute('data-reached'));
      done += all;
      ch.toggleAttribute('data-done', all);
      ch.toggleAttribute('data-here', ch === here);
      ch.querySelector('[data-chapter-state]').textContent = all ? 'done' : ch === here ? 'you are here' : '';
    }
    const reached = targets.filter((el) => el.hasAttribute('data-reached')).length;
    standing.textContent = `${reached} of ${plural(targets.length, 'target')} reached · ${done} of ${
      plural(chapters.length, 'step')} done`;
  }

  function update(announce) {
    const reached = [];  // one notice for every target this change reached, never a pile
    for (const el of targets) {
      const { target, drill } = el.dataset;
      const need = Number(el.dataset.streak);
      const { current, best } = progress.streak(drill);
      if (!progress.reached(target) && best >= need) {
        progress.markReached(target);
        reached.push({ drill, text: `${labelOf(el)}: ${nameOf(el)}, ${need} in a row` });
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
    const unmet = targets.find((el) => open.has(el.dataset.drill) && !el.hasAttribute('data-reached'));
    showNext(unmet);
    showStanding(unmet);
    for (const chip of chips) {
      const { current, best } = progress.streak(chip.dataset.summaryStreak);
      chip.textContent = best ? `${current} · best ${best}` : `${current}`;
    }
  }

  for (const details of root.querySelectorAll('[data-example]')) {
    if (details.open) showExample(details);
    details.addEventListener('toggle', () => { if (details.open) showExample(details); });
  }
  progress.addEventListener('change', (e) => { if (!e.detail.reached) update(true); });
  setInterval(() => update(false), 60 * 1000);  // cards fall due with time, not only on answers
  update(false);
}
