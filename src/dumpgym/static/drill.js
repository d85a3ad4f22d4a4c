// The drills: one question at a time, an answer that says why, a streak that counts.
// An item's answer form says how it is answered (answer.js grades each): a `choice` is one button per
// option, a `line` or a set of `lines` is tapped in a real listing, a `typed` value is written and a set
// of `axes` toggled as chips (answer-view.js). Its context is resolved from the program's listings
// (context.js); its card (`item.card`) is what the scheduler keeps.
import { html, render, ticks } from './html.js';
import { check } from './answer.js';
import { gradeAxes, renderAxes, renderTyped } from './answer-view.js';
import { resolveContext } from './context.js';
import { drillURL, getJSON, onScreen, programTitle, typing } from './data.js';
import { LAYERS, lineKey, renderLines } from './line-view.js';
import { markCuts } from './cuts.js';
import { showCited } from './scroll.js';
import { weightOf } from './sample.js';
import { loadScheduler, optionOrder, pickNext, skillOf } from './schedule.js';
import { schedulerTrouble } from './progress-check.js';
import { onTabKeys, selectTab } from './tabs.js';

/** An option or show value as text, spelled the way a jaxpr prints params (True, None, [1, 0]). */
export function show(value) {
  if (Array.isArray(value)) return `[${value.map(show).join(', ')}]`;
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).map(([k, v]) => `${k}=${show(v)}`).join(' ');
  }
  return String(value);
}

/** Whether an item matches a focus filter ({skill} or {primitive}); everything matches no filter. */
export function focusMatches(item, filter) {
  if (!filter) return true;
  if ('skill' in filter) return skillOf(item) === filter.skill;
  if ('primitive' in filter) return item?.primitive === filter.primitive;
  return true;
}

/**
 * A drill panel's `data-pool` as [{slug, count, weight, base}]: each entry `slug:count`, or `slug:count:weight`
 * when the build sums the split's weights for us, and `slug:count:weight:base` for a variant of program
 * `base` (a program's own base is itself: schedule.js never draws one base twice in a row while another has weight).
 */
export function readPool(text) {
  return (text || '').split(' ').filter(Boolean).map((entry) => {
    const [slug, count, weight, base] = entry.split(':');
    return { slug, count: Number(count), weight: weight === undefined ? null : Number(weight), base: base ?? slug };
  });
}

class Panel {
  constructor(el, progress) {
    this.el = el;
    this.kind = el.dataset.drill;
    this.progress = progress;
    this.body = el.querySelector('[data-drill-body]');
    this.pool = readPool(el.dataset.pool);
    this.total = this.pool.reduce((a, p) => a + p.count, 0);
    this.item = null;
    this.answered = false;
    this.last = null;  // { slug, index, weight, family, base } of the item just asked
    this.focusFilter = null;  // {skill} or {primitive}: draw only matching items (set by the mastery map)
    this.yours = new Set();  // slugs of the learner's added programs (registerDrills sets them)
    this.yoursOnly = false;
    // `slug:weight`: your programs whose items of this kind are asked, drawn alone, with other programs' items
    // (data/drills/with/KIND/SLUG.json, summed weight): a step whose answers one program cannot even out.
    this.withs = new Map((el.dataset.with || '').split(' ').filter(Boolean).map((entry) => {
      const [slug, weight] = entry.split(':');
      return [slug, Number(weight)];
    }));
    this.merged = new Map();  // slug -> its split with the items it is asked with, fetched once
    this.togetherShown = false;  // the lines saying why, rendered the first time "only your programs" is on
    this.starting = null;  // the first question's pick, while it is on its way
    this.showStreak();
  }

  /** An item's weight under the focus filter (see `focus` in registerDrills): 0 when it does not match. */
  focusWeight(item) {
    return focusMatches(item, this.focusFilter) ? weightOf(item) : 0;
  }

  /**
   * A program's items as drawn: its split, and with "only your programs" on, the other programs' items it is
   * asked with after them (each keeps its `program`, whose listings it shows), one merged split per program.
   */
  split(slug) {
    if (!this.yoursOnly || !this.withs.has(slug)) return getJSON(drillURL(this.kind, slug));
    if (!this.merged.has(slug)) {
      this.merged.set(slug, Promise.all([getJSON(drillURL(this.kind, slug)), getJSON(drillURL(this.kind, slug, true))])
        .then(([own, more]) => ({ ...own, items: [...own.items, ...more.items] })));
    }
    return this.merged.get(slug);
  }

  /** With "only your programs" on, one line per step a program of yours is asked with others' items, and why
   * (the `notes` of data/drills/with/KIND/SLUG.json; shown only while the box is checked, gym.css). */
  async showTogether() {
    const holder = this.el.querySelector('[data-together-notes]');
    if (!holder || this.togetherShown) return;
    this.togetherShown = true;
    const slugs = [...this.withs.keys()];
    const files = await Promise.all(slugs.map((slug) => getJSON(drillURL(this.kind, slug, true))));
    render(holder, html`${slugs.flatMap((slug, i) => (files[i].notes ?? []).map((why) =>
      html`<p data-together-note><code>${slug}</code> · ${ticks(why)}</p>`))}`);
  }

  /** Each program's share under the focus filter: the matching items' weights, from every split (fetched once). */
  async focusMasses() {
    const splits = await Promise.all(this.pool.map((p) => this.split(p.slug)));
    return splits.map((split) => split.items.reduce((a, item) => a + this.focusWeight(item), 0));
  }

  showStreak() {
    const { current, best } = this.progress.streak(this.kind);
    this.el.querySelector('[data-streak-current]').textContent = current;
    this.el.querySelector('[data-streak-best]').textContent = best;
  }

  /** Ask the first question, once: a tab opened while the first pick is still on its way waits for it. */
  start() {
    if (this.item || this.starting || !this.total) return;
    this.starting = this.next({ focus: false }).finally(() => { this.starting = null; });
  }

  /** Each program's items' weights summed (from `data-pool`, else from its split), or under the focus filter. */
  async masses() {
    if (this.focusFilter) return this.focusMasses();
    const unknown = this.pool.filter((p) => p.weight === null);
    const splits = await Promise.all(unknown.map((p) => getJSON(drillURL(this.kind, p.slug))));
    unknown.forEach((p, i) => { p.weight = splits[i].items.reduce((a, item) => a + weightOf(item), 0); });
    return this.pool.map((p) => p.weight + (this.yoursOnly ? this.withs.get(p.slug) ?? 0 : 0));
  }

  /** The programs to draw from (only the learner's own with "your programs" on; all when it has none of them). */
  drawPool() {
    const yours = this.pool.filter((p) => this.yours.has(p.slug));
    this.el.toggleAttribute('data-none-yours', Boolean(this.yoursOnly && !yours.length));  // says so: _drills.html
    return this.yoursOnly && yours.length ? yours : this.pool;
  }

  /** The next item: due reviews first, mixed with families never answered, by weight (schedule.js's `pickNext`). */
  async pick() {
    const all = await this.masses();
    const pool = this.drawPool();
    const masses = pool.map((p) => all[this.pool.indexOf(p)]);
    return pickNext({
      kind: this.kind, pool, masses, last: this.last, cards: this.progress.cards(),
      split: (slug) => this.split(slug), weight: (item) => this.focusWeight(item),
    });
  }

  async next({ focus = true } = {}) {
    this.el.dataset.state = 'loading';  // until the next question is on screen (a focus change replaces one)
    let picked;
    try {
      picked = await this.pick();
    } catch (e) {
      render(this.body, html`<p class="empty">Could not load drill items (${e.message}).</p>`);
      this.el.dataset.state = 'empty';
      return;
    }
    if (!picked) {
      render(this.body, html`<p class="empty">Every item of this drill has weight 0: nothing to ask.</p>`);
      this.el.dataset.state = 'empty';
      return;
    }
    const { slug, index, split } = picked;
    // An item another program gives yours to be asked with (`split`) shows that program's listings and name.
    const from = split.items[index].program ?? slug;
    let blocks;
    try {
      blocks = await resolveContext(from, split.items[index].context);
    } catch (e) {
      render(this.body, html`<p class="empty">Could not load the question's listings (${e.message}).</p>`);
      this.el.dataset.state = 'empty';
      return;
    }
    this.item = split.items[index];
    this.last = { slug, index, weight: picked.weight, family: this.item.card, base: picked.base };
    this.standsFor = picked.standsFor ?? null;  // the due card a sibling is asked in place of (schedule.js)
    this.answered = false;
    this.el.dataset.item = `${this.kind}/${slug}/${index}`;
    this.el.dataset.scheduled = picked.reason;  // due, new or ahead (schedule.js)
    if (this.standsFor) this.el.dataset.standsFor = this.standsFor;  // a sibling asked for this due card
    else delete this.el.dataset.standsFor;
    const { form } = this.item.answer;
    if (form === 'line' || form === 'lines') renderLines(this, from, blocks);
    else if (form === 'typed' || form === 'axes') {
      const view = { ctx: html`<div class="ctx">${this.header(from, '')}${this.shownBlocks(blocks)}</div>`,
        question: html`<p class="q" tabindex="-1" id="q-${this.kind}">${this.item.question}</p>` };
      (form === 'typed' ? renderTyped : renderAxes)(this, view);
      this.body.querySelector('[data-next]').addEventListener('click', () => this.next());
    } else this.renderChoice(from, blocks);
    markCuts(this.body);
    this.el.dataset.state = 'asking';
    if (focus) {
      // The next question replaces one the page may have scrolled for (a long fused computation): unless
      // the question and its first answer are both in view, below the sticky header, bring it to the top.
      // A typed answer is typed straight away: its field takes the focus.
      const q = this.body.querySelector('.q');
      (this.body.querySelector('[data-typed-input]') ?? q).focus({ preventScroll: true });
      const first = this.body.querySelector('[data-opt], [data-pick], [data-typed], [data-axes]') ?? q;
      const header = document.querySelector('.top')?.getBoundingClientRect().bottom ?? 0;
      if (q.getBoundingClientRect().top < header || first.getBoundingClientRect().top > innerHeight - 40) {
        q.scrollIntoView({ block: 'start' });
      }
      // A line the question cites ("compiled HLO line 148") is in view too, with the question when both fit.
      showCited(this.body, this.item.question, { page: true, with: q });
    } else showCited(this.body, this.item.question);
    this.shownAt = performance.now();  // the answer's time rates its card (schedule.js's ratingOf)
  }

  /**
   * The caption above a question: the program, the layer whose listing it shows (a compiled one with its
   * target), and for a jaxpr item the equation's jaxpr lines. Never jaxpr lines above another layer's line:
   * they are not the numbers of what is shown.
   */
  header(slug, extra, { lines = true } = {}) {
    const { layer, jaxpr_lines: span } = this.item;
    const named = ` · ${LAYERS[layer] ?? (layer ? `compiled HLO, ${layer}` : 'jaxpr')}`;
    const where = lines && layer === 'jaxpr' && Array.isArray(span) && span.length
      ? (span[span.length - 1] > span[0] ? ` lines ${span[0]}–${span[span.length - 1]}` : ` line ${span[0]}`)
      : '';
    return html`<p class="where" data-caption><a href="#p-${slug}"><bdi>${programTitle(slug)}</bdi></a>${named}${where}${extra}</p>`;
  }

  /** The question's context: each block its `context` resolves to, as text, and nothing else. */
  shownBlocks(blocks) {
    return blocks.map((block) => html`<pre class="eqn shown" data-shown>${block}</pre>`);
  }

  renderChoice(slug, blocks) {
    const item = this.item;
    const { options } = item.answer;
    // A card asked before comes back re-spelled: its options in an order not shown yet (schedule.js).
    this.order = optionOrder(item.card, options.length, Object.hasOwn(this.progress.cards(), item.card));
    const context = this.shownBlocks(blocks);
    render(this.body, html`
      <div class="ctx">
        ${this.header(slug, '')}
        ${context}
      </div>
      <p class="q" tabindex="-1" id="q-${this.kind}">${item.question}</p>
      <div class="options" role="group" aria-labelledby="q-${this.kind}">
        ${this.order.map((k, i) => html`<button type="button" class="opt" data-opt="${i}"><kbd aria-hidden="true">${i + 1}</kbd><code>${show(options[k])}</code></button>`)}
      </div>
      <div class="feedback" data-feedback aria-live="polite"></div>
      <p class="next-row"><button type="button" class="next" data-next hidden>next question <kbd aria-hidden="true">↵</kbd></button></p>`);
    this.body.querySelectorAll('[data-opt]').forEach((b) =>
      b.addEventListener('click', () => this.answer(Number(b.dataset.opt))));
    this.body.querySelector('[data-next]').addEventListener('click', () => this.next());
  }

  /** Answer a choice by the position (from 0) of the option on screen. */
  answer(position) {
    const item = this.item;
    if (this.answered || item.answer.form !== 'choice' || position >= item.answer.options.length) return;
    const { options, index: answer } = item.answer;
    const index = this.order[position];
    const verdict = check(item.answer, index);
    const right = verdict.right;
    this.body.querySelectorAll('[data-opt]').forEach((b, i) => {
      b.disabled = true;
      b.classList.toggle('right', this.order[i] === answer);
      b.classList.toggle('wrong', i === position && !right);
      b.classList.toggle('chosen', i === position);
    });
    const why = verdict.reason;
    const said = right
      ? html`<p><b class="ok">right:</b> <code>${show(options[answer])}</code></p>`
      : html`<p><b class="no">not quite.</b> The answer is <code>${show(options[answer])}</code>.</p>
             <p>You chose <code>${show(options[index])}</code>${why ? html`: ${ticks(why)}.` : '.'}</p>`;
    this.finish(right, html`${said}${item.feedback ? html`<p data-why>${ticks(item.feedback)}</p>` : ''}`);
  }

  /** A key of the line view (line-view.js's `lineKey`): whether it was used. */
  lineKey(key) {
    return lineKey(this, key);
  }

  /** Toggle chip `axis` (from 0) of an axes answer; a key toggles it with the focus (Enter, from there, checks). */
  toggleAxis(axis, { focus = false } = {}) {
    const chip = this.body.querySelector(`[data-axis="${axis}"]`);
    if (this.answered || !chip) return;
    chip.setAttribute('aria-pressed', String(chip.getAttribute('aria-pressed') !== 'true'));
    if (focus) chip.focus({ preventScroll: true });
  }

  submitAxes() {
    if (!this.answered) gradeAxes(this);
  }

  async finish(right, message) {
    this.answered = true;
    const reviewed = await this.progress.review(this.item, right, performance.now() - this.shownAt, { standsFor: this.standsFor })
      .catch((e) => schedulerTrouble(this.progress, e));  // progress-check.js: the drill moves on
    this.el.dataset.state = 'answered';
    const { current } = this.progress.streak(this.kind);
    // A right answer to a question whose answer this run has shown is no reading: the streak stays.
    const counted = reviewed?.counted ?? true;
    this.el.toggleAttribute('data-not-counted', !counted);
    render(this.body.querySelector('[data-feedback]'), html`${message}<p class="fine">${!right
      ? 'streak back to 0' : counted ? `streak ${current}`
        : `streak stays at ${current}: you saw this question's answer earlier in this run`}</p>`);
    this.body.querySelector('[data-feedback]').className = `feedback ${right ? 'good' : 'bad'}`;
    const next = this.body.querySelector('[data-next]');
    next.hidden = false;
    next.focus({ preventScroll: true });
    // The answer is read where it appears: bring the next button, then the feedback (which wins if both
    // cannot fit), into view, the least scroll that does it. A tap below the fold showed only a colour.
    next.scrollIntoView({ block: 'nearest' });
    this.body.querySelector('[data-feedback]').scrollIntoView({ block: 'nearest' });
  }
}

/**
 * Keep `--top-h` (the sticky header's height) and `--tabs-h` (the drill tabs', with their margin) current
 * on the page, so that a link to a drill lands with its tabs below the header (gym.css, `section.drill`).
 */
function keepTabsInView(root) {
  const top = document.querySelector('.top');
  const tablist = root.querySelector('[role=tablist]');
  if (!tablist) return;
  const style = document.documentElement.style;
  const measure = () => {
    style.setProperty('--top-h', `${top?.offsetHeight ?? 0}px`);
    style.setProperty('--tabs-h', `${tablist.offsetHeight + parseFloat(getComputedStyle(tablist).marginBottom || '0')}px`);
  };
  const watch = new ResizeObserver(measure);
  if (top) watch.observe(top);
  watch.observe(tablist);
  measure();
}

/** Wire the drill tabs, panels and keys. */
export function registerDrills(root, progress, preferred) {
  const tabs = [...root.querySelectorAll('[data-drill-tab]')];
  const panels = new Map([...root.querySelectorAll('section[data-drill]')].map((el) => [el.dataset.drill, new Panel(el, progress)]));
  let active = panels.get(preferred) ? preferred : tabs[0]?.dataset.drillTab;

  function select(kind, { focusTab = false } = {}) {
    if (!panels.has(kind)) return;
    active = kind;
    selectTab(tabs, tabs.find((tab) => tab.dataset.drillTab === kind), focusTab);
    for (const [name, panel] of panels) panel.el.hidden = name !== kind;
    panels.get(kind).start();
  }

  for (const tab of tabs) tab.addEventListener('click', () => select(tab.dataset.drillTab));
  keepTabsInView(root);
  markCuts(root);  // the drill tabs too: at 375 px most of them are past the edge
  // The scheduler rates answers only: fetch it at the learner's first touch, well before the answer lands.
  // (An early start only: should it fail, the answer's own load says so, progress-check.js.)
  root.addEventListener('pointerdown', () => loadScheduler().catch(() => {}), { once: true, passive: true });
  document.addEventListener('keydown', () => loadScheduler().catch(() => {}), { once: true, passive: true });
  onTabKeys(root.querySelector('[role=tablist]'), () => ({ tabs, i: tabs.findIndex((t) => t.dataset.drillTab === active) }),
    (tab) => select(tab.dataset.drillTab, { focusTab: true }));
  document.addEventListener('click', (e) => {
    const link = e.target.closest('[data-open-drill]');
    if (link) select(link.dataset.openDrill);
  });
  const fromHash = () => {
    // Matched as typed, never decoded: a malformed hash (`#drill-%E0%A4%A`) just doesn't match.
    const m = location.hash.match(/^#drill-([a-z0-9-]+)$/);
    if (m) select(m[1]);
  };
  window.addEventListener('hashchange', fromHash);
  document.addEventListener('keydown', (e) => {
    if (typing(e) || !onScreen(root)) return;
    const panel = panels.get(active);
    if (!panel?.item) return;
    const { form } = panel.item.answer;
    const choosing = form === 'choice';
    const lining = form === 'line' || form === 'lines';
    if (/^[1-9]$/.test(e.key) && !panel.answered && choosing) {
      e.preventDefault();
      panel.answer(Number(e.key) - 1);
    } else if (form === 'axes' && !panel.answered && /^[0-9]$/.test(e.key)) {
      e.preventDefault();
      panel.toggleAxis(Number(e.key), { focus: true });
    } else if (form === 'axes' && !panel.answered && e.key === 'Enter' && !e.target.closest('button, a')) {
      e.preventDefault();
      panel.submitAxes();
    } else if (form === 'typed' && !panel.answered && e.key.length === 1 && e.key !== ' ' &&
               (document.activeElement === document.body || root.contains(document.activeElement))) {
      // A key typed with the field out of focus is the answer's first character: it goes to the field.
      // Not from another part of the page (the x-ray's listing owns j/k), whose keys stay its own.
      panel.body.querySelector('[data-typed-input]')?.focus({ preventScroll: true });
    } else if (lining && (/^[0-9]$/.test(e.key) || panel.el.contains(document.activeElement)) &&
               panel.lineKey(e.key)) {
      // Digits type a line's key number; j/k step (only from inside the panel: the x-ray owns j/k too,
      // and its listener, registered after this one, must not also walk).
      e.preventDefault();
      e.stopImmediatePropagation();
    } else if ((e.key === 'Enter' || e.key === ' ') && panel.answered &&
               !e.target.closest('button, a, [data-pick]')) {
      e.preventDefault();
      panel.next();
    }
  });
  progress.addEventListener('change', () => panels.forEach((p) => p.showStreak()));
  select(active);
  fromHash();

  /** Make `kind`'s panel draw only items matching `filter` ({skill} or {primitive}), or every item again with null; opens its tab. */
  function focus(kind, filter) {
    const panel = panels.get(kind);
    if (!panel) return;
    const had = panel.item;
    panel.focusFilter = filter || null;
    panel.el.toggleAttribute('data-focus', Boolean(filter));
    if (had) panel.last = { ...panel.last, weight: panel.focusWeight(had) };
    if (filter) select(kind);
    // A new focus starts with a fresh question of it (never the one on screen, as always).
    if (had && filter) panel.next({ focus: false });
  }
  // "Your programs": draw only from the programs the learner added (the page lists them in data-yours).
  const yours = new Set((root.dataset.yours || '').split(' ').filter(Boolean));
  const only = root.querySelector('[data-yours-only]');
  for (const panel of panels.values()) panel.yours = yours;
  only?.addEventListener('change', () => {
    for (const panel of panels.values()) {
      panel.yoursOnly = only.checked;
      panel.el.toggleAttribute('data-yours-only', only.checked);  // shows the steps asked with others (gym.css)
      if (only.checked) panel.showTogether();
    }
    const panel = panels.get(active);
    if (panel?.item && !panel.answered) panel.next({ focus: false });
  });
  return { select, focus };
}
