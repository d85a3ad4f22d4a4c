// Drills 01–03: one question at a time, one tap to answer, feedback that says why, a streak that counts.
// Multiple-choice kinds (decoder, shapes, any kind with `options`) share one view; `decisions`
// asks for a line of a real listing instead.
import { html, render, ticks } from './html.js';
import { drillURL, getJSON, lineElements, onScreen, programTitle, typing } from './data.js';
import { scrollIntoBox } from './scroll.js';
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

/** An item's weight: how often the page asks it relative to the others (1 when the item has none). */
export function weightOf(item) {
  const w = item?.weight;
  return typeof w === 'number' && Number.isFinite(w) && w > 0 ? w : (w === undefined || w === null ? 1 : 0);
}

/**
 * Draw an index with probability proportional to its weight, never `skip` while any other index has
 * weight; -1 when nothing has weight. `random` returns a number in [0, 1), as Math.random does.
 */
export function pickWeighted(weights, skip = -1, random = Math.random) {
  const mass = (i) => (i === skip ? 0 : Math.max(0, weights[i]) || 0);
  let total = 0;
  for (let i = 0; i < weights.length; i++) total += mass(i);
  if (total <= 0) return skip >= 0 && weights[skip] > 0 ? skip : -1;
  let r = random() * total;
  let chosen = -1;
  for (let i = 0; i < weights.length; i++) {
    if (mass(i) <= 0) continue;
    chosen = i;
    if ((r -= mass(i)) < 0) break;
  }
  return chosen;  // the last with weight, should rounding leave `r` a hair above zero
}

class Panel {
  constructor(el, progress) {
    this.el = el;
    this.kind = el.dataset.drill;
    this.progress = progress;
    this.body = el.querySelector('[data-drill-body]');
    // `slug:count`, or `slug:count:weight` when the build sums the split's weights for us.
    this.pool = (el.dataset.pool || '').split(' ').filter(Boolean).map((s) => {
      const [slug, count, weight] = s.split(':');
      return { slug, count: Number(count), weight: weight === undefined ? null : Number(weight) };
    });
    this.total = this.pool.reduce((a, p) => a + p.count, 0);
    this.item = null;
    this.answered = false;
    this.last = null;  // { slug, index, weight } of the item just asked
    this.showStreak();
  }

  showStreak() {
    const { current, best } = this.progress.streak(this.kind);
    this.el.querySelector('[data-streak-current]').textContent = current;
    this.el.querySelector('[data-streak-best]').textContent = best;
  }

  start() {
    if (!this.item && this.total) this.next({ focus: false });
  }

  /** Each program's share of the kind: its items' weights summed (from `data-pool`, else from its split). */
  async masses() {
    const unknown = this.pool.filter((p) => p.weight === null);
    const splits = await Promise.all(unknown.map((p) => getJSON(drillURL(this.kind, p.slug))));
    unknown.forEach((p, i) => { p.weight = splits[i].items.reduce((a, item) => a + weightOf(item), 0); });
    return this.pool.map((p) => p.weight);
  }

  /** The next item, drawn in proportion to its weight and never the one just asked (unless nothing else has weight). */
  async pick() {
    const last = this.last;
    // A program, by the weight of its items less the one just asked; then an item of it, by weight.
    // (What rounding leaves of a sum less its only weighted item counts as nothing.)
    const masses = (await this.masses()).map((w, i) => {
      const rest = last && this.pool[i].slug === last.slug ? w - last.weight : w;
      return rest > 1e-9 * w ? rest : 0;
    });
    const p = pickWeighted(masses, -1, Math.random);
    if (p < 0) return last && { ...last, split: await getJSON(drillURL(this.kind, last.slug)) };
    const slug = this.pool[p].slug;
    const split = await getJSON(drillURL(this.kind, slug));
    const index = pickWeighted(split.items.map(weightOf), last && last.slug === slug ? last.index : -1, Math.random);
    return index < 0 ? null : { slug, index, weight: weightOf(split.items[index]), split };
  }

  async next({ focus = true } = {}) {
    let picked;
    try {
      picked = await this.pick();
    } catch (e) {
      render(this.body, html`<p class="empty">Could not load drill items (${e.message}).</p>`);
      return;
    }
    if (!picked) {
      render(this.body, html`<p class="empty">Every item of this drill has weight 0: nothing to ask.</p>`);
      return;
    }
    const { slug, index, split } = picked;
    this.last = { slug, index, weight: picked.weight };
    this.item = split.items[index];
    this.answered = false;
    this.el.dataset.item = `${this.kind}/${slug}/${index}`;
    if (Array.isArray(this.item.options)) this.renderChoice(slug);
    else this.renderLines(slug);
    this.el.dataset.state = 'asking';
    if (focus) this.body.querySelector('.q').focus({ preventScroll: true });
  }

  header(slug, extra, { lines = true } = {}) {
    const span = this.item.jaxpr_lines;
    const where = lines && Array.isArray(span) && span.length
      ? (span[span.length - 1] > span[0] ? ` · jaxpr lines ${span[0]}–${span[span.length - 1]}` : ` · jaxpr line ${span[0]}`)
      : '';
    return html`<p class="where"><a href="#p-${slug}">${programTitle(slug)}</a>${where}${extra}</p>`;
  }

  /** The question's context when the item says what it is: each block of `shown`, as text, and nothing else. */
  shownBlocks(blocks) {
    return blocks.map((block) => html`<pre class="eqn shown" data-shown>${block}</pre>`);
  }

  renderChoice(slug) {
    const item = this.item;
    const context = this.shownBlocks(item.shown);
    render(this.body, html`
      <div class="ctx">
        ${this.header(slug, '')}
        ${context}
      </div>
      <p class="q" tabindex="-1" id="q-${this.kind}">${item.question}</p>
      <div class="options" role="group" aria-labelledby="q-${this.kind}">
        ${item.options.map((o, i) => html`<button type="button" class="opt" data-opt="${i}"><kbd aria-hidden="true">${i + 1}</kbd><code>${show(o)}</code></button>`)}
      </div>
      <div class="feedback" data-feedback aria-live="polite"></div>
      <p class="next-row"><button type="button" class="next" data-next hidden>next question <kbd aria-hidden="true">↵</kbd></button></p>`);
    this.body.querySelectorAll('[data-opt]').forEach((b) =>
      b.addEventListener('click', () => this.answer(Number(b.dataset.opt))));
    this.body.querySelector('[data-next]').addEventListener('click', () => this.next());
  }

  renderLines(slug) {
    const item = this.item;
    const layer = item.layer === 'stablehlo' ? 'StableHLO' : 'jaxpr';
    render(this.body, html`
      <div class="ctx">${this.header(slug, html` · ${layer}${item.kind ? html` · <span class="tag">${item.kind}</span>` : ''}`, { lines: false })}${
        this.shownBlocks(item.shown.slice(1))}</div>
      <p class="q" tabindex="-1" id="q-${this.kind}">${item.question}</p>
      <div class="pick" data-pick tabindex="0" role="group" aria-labelledby="q-${this.kind}" aria-describedby="pick-help-${this.kind}"></div>
      <p class="fine" id="pick-help-${this.kind}">click a line, or move with ↑/↓ and press Enter</p>
      <div class="feedback" data-feedback aria-live="polite"></div>
      <p class="next-row"><button type="button" class="next" data-next hidden>next question <kbd aria-hidden="true">↵</kbd></button></p>`);
    const pick = this.body.querySelector('[data-pick]');
    // `shown[0]` is the whole listing the question is about: its lines are the rows to tap.
    const lines = String(item.shown[0] ?? '').replace(/\n$/, '').split('\n');
    render(pick, html`<pre class="ls" data-layer="${item.layer === 'stablehlo' ? 'stablehlo' : 'jaxpr'}"><code>${
      lines.map((line, i) => html`<span data-line="${i + 1}">${line}\n</span>`)}</code></pre>`);
    this.rows = lineElements(pick.querySelector('pre'));
    this.cursor = 0;
    pick.addEventListener('click', (e) => {
      e.preventDefault();
      const row = e.target.closest('[data-line]');
      if (row && !this.answered) this.answerLine(Number(row.dataset.line));
    });
    pick.addEventListener('focus', () => { if (!this.answered) this.rows[this.cursor]?.classList.add('cur'); });
    pick.addEventListener('keydown', (e) => {
      if (this.answered || !this.rows.length) return;
      const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 }[e.key];
      if (step) {
        e.preventDefault();
        this.rows[this.cursor]?.classList.remove('cur');
        this.cursor = Math.max(0, Math.min(this.rows.length - 1, this.cursor + step));
        this.rows[this.cursor].classList.add('cur');
        scrollIntoBox(pick, this.rows[this.cursor]);
      } else if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        e.stopPropagation();
        this.answerLine(this.cursor + 1);
      }
    });
    this.body.querySelector('[data-next]').addEventListener('click', () => this.next());
  }

  answer(index) {
    if (this.answered || !this.item.options || index >= this.item.options.length) return;
    const item = this.item;
    const right = index === item.answer;
    this.body.querySelectorAll('[data-opt]').forEach((b, i) => {
      b.disabled = true;
      b.classList.toggle('right', i === item.answer);
      b.classList.toggle('wrong', i === index && !right);
      b.classList.toggle('chosen', i === index);
    });
    const why = item.reasons?.[index];
    const verdict = right
      ? html`<p><b class="ok">right:</b> <code>${show(item.options[item.answer])}</code></p>`
      : html`<p><b class="no">not quite.</b> The answer is <code>${show(item.options[item.answer])}</code>.</p>
             <p>You chose <code>${show(item.options[index])}</code>${why ? html`: ${ticks(why)}.` : '.'}</p>`;
    this.finish(right, html`${verdict}${item.feedback ? html`<p>${ticks(item.feedback)}</p>` : ''}`);
  }

  answerLine(line) {
    if (this.answered) return;
    const item = this.item;
    const accepted = Array.isArray(item.accepted_lines) ? item.accepted_lines : [item.answer_line];
    const right = accepted.includes(line);
    const chosen = this.rows[line - 1];
    const answer = this.rows[(right ? line : item.answer_line) - 1];
    chosen?.classList.add(right ? 'right' : 'wrong');
    answer?.classList.add('ans');
    const pick = this.body.querySelector('[data-pick]');
    if (answer) scrollIntoBox(pick, answer);
    const text = answer ? answer.textContent.trim() : '';
    const why = item.feedback ? html`<p>${ticks(item.feedback)}</p>` : html`<p>Line ${item.answer_line}: <code>${text}</code></p>`;
    const explain = item.explain?.[String(line)];
    this.finish(right, right
      ? html`<p><b class="ok">right.</b></p>${why}`
      : html`<p><b class="no">not that line.</b> You picked line ${line}; the framework's line is ${item.answer_line}.</p>${
        explain ? html`<p data-explain>${ticks(explain)}</p>` : why}`);
  }

  finish(right, message) {
    this.answered = true;
    this.el.dataset.state = 'answered';
    this.progress.record(this.kind, right);
    const { current } = this.progress.streak(this.kind);
    render(this.body.querySelector('[data-feedback]'), html`${message}<p class="fine">${right
      ? `streak ${current}` : 'streak back to 0'}</p>`);
    this.body.querySelector('[data-feedback]').className = `feedback ${right ? 'good' : 'bad'}`;
    const next = this.body.querySelector('[data-next]');
    next.hidden = false;
    next.focus({ preventScroll: true });
  }
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
    if (/^[1-9]$/.test(e.key) && !panel.answered && panel.item.options) {
      e.preventDefault();
      panel.answer(Number(e.key) - 1);
    } else if ((e.key === 'Enter' || e.key === ' ') && panel.answered &&
               !e.target.closest('button, a, [data-pick]')) {
      e.preventDefault();
      panel.next();
    }
  });
  progress.addEventListener('change', () => panels.forEach((p) => p.showStreak()));
  select(active);
  fromHash();
  return { select };
}
