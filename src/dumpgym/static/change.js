// One change, two compiles: a program's compiled layer beside the same program's compile with one thing
// changed, for one compile target. What lines up, what appeared, vanished or changed, and each side's
// counts, buffers and estimated time are cost/compare.py's (data/change/TARGET/SLUG.json); the listings are the
// ones the x-ray fetches (data/compiled/TARGET/SLUG.json). Nothing here is worked out but ratios and which
// lines to light.
import { html, plural, render } from './html.js';
import { getJSON, hloURL, listingMarkup, onScreen, typing } from './data.js';
import { scrollIntoBox } from './scroll.js';
import { duration, si } from './xray-cost.js';

const SIDES = ['base', 'changed'];
const MARKS = { appeared: 'add', vanished: 'del', modified: 'mod' };
const SIGN = { add: '+', del: '−', mod: '~' };
const CATEGORY_WORDS = { collective: 'collectives', copy: 'copies', fusion: 'fusions', other: 'other instructions' };

/** The URL of one change's two compiles side by side for a compile target id. */
export const changeURL = (slug, target) => `data/change/${encodeURIComponent(target)}/${encodeURIComponent(slug)}.json`;

/** "2.0× slower", "1.5× faster", "the same": how the changed figure compares with the base's. */
function ratio(a, b, more = 'more', less = 'less') {
  if (a === b) return 'the same';
  if (!a || !b) return '';
  return b > a ? `${(b / a).toFixed(2)}× ${more}` : `${(a / b).toFixed(2)}× ${less}`;
}

/** Which equation pairs each compiled line computes, per side (line -> indices into `diff.eqns`), and the
 * counterpart of each changed row (side -> line -> the other side's line). */
export function indexChange(diff) {
  const pairs = { base: new Map(), changed: new Map() };
  const byEqn = { base: new Map(), changed: new Map() };
  diff.eqns.forEach((p, k) => {
    if (p.base !== null) byEqn.base.set(p.base, k);
    if (p.changed !== null) byEqn.changed.set(p.changed, k);
    for (const [side, lines] of [['base', p.base_lines], ['changed', p.changed_lines]]) {
      for (const n of lines) {
        if (!pairs[side].has(n)) pairs[side].set(n, []);
        pairs[side].get(n).push(k);
      }
    }
  });
  const twin = { base: new Map(), changed: new Map() };
  for (const m of diff.modified) {
    twin.base.set(m.base.line, m.changed.line);
    twin.changed.set(m.changed.line, m.base.line);
  }
  const rows = { base: new Map(), changed: new Map() };
  for (const r of diff.appeared) rows.changed.set(r.line, ['appeared', r]);
  for (const r of diff.vanished) rows.base.set(r.line, ['vanished', r]);
  for (const m of diff.modified) {
    rows.base.set(m.base.line, ['modified', m.base]);
    rows.changed.set(m.changed.line, ['modified', m.changed]);
  }
  // A row's own equations count too: a line the attribution credits with an equation it lists no line for.
  for (const side of SIDES) {
    for (const [n, [, r]] of rows[side]) {
      const ks = new Set(pairs[side].get(n) ?? []);
      for (const e of r.eqns) if (byEqn[side].has(e)) ks.add(byEqn[side].get(e));
      pairs[side].set(n, [...ks]);
    }
  }
  return { pairs, twin, rows };
}

/** The lines to light on each side for line `n` of `side`: those of the equations it computes, and its
 * counterpart where the row is the same work changed. */
export function litBy(diff, index, side, n) {
  const lit = { base: new Set(), changed: new Set() };
  for (const k of index.pairs[side].get(n) ?? []) {
    const p = diff.eqns[k];
    for (const m of p.base_lines) lit.base.add(m);
    for (const m of p.changed_lines) lit.changed.add(m);
  }
  lit[side].add(n);
  const other = side === 'base' ? 'changed' : 'base';
  const twin = index.twin[side].get(n);
  if (twin) lit[other].add(twin);
  return { base: [...lit.base].sort((a, b) => a - b), changed: [...lit.changed].sort((a, b) => a - b) };
}

class ChangeSection {
  constructor(root) {
    this.root = root;
    this.pick = root.querySelector('[data-change-pick]');
    this.targetsEl = root.querySelector('[data-change-targets]');
    this.summary = root.querySelector('[data-change-summary]');
    this.status = root.querySelector('[data-change-status]');
    this.rowsEl = root.querySelector('[data-change-rows]');
    this.cols = Object.fromEntries(SIDES.map((s) => [s, root.querySelector(`[data-change-col="${s}"]`)]));
    this.names = Object.fromEntries(SIDES.map((s) => [s, root.querySelector(`[data-change-name="${s}"]`)]));
    this.idleNodes = [...this.status.childNodes].map((n) => n.cloneNode(true));
    this.target = this.targetsEl.querySelector('[data-change-target]')?.dataset.changeTarget ?? null;
    this.shown = null;   // {slug, target, diff, index, rows: side -> line elements}
    this.wanted = null;  // `${slug} ${target}` of the load that should end up on show
    this.lit = [];
    this.pinned = null;  // {side, n}
    this.cursor = null;  // {side, n}
  }

  /** The compile targets the picked change has, in the page's order. */
  targetsOf(option) {
    return option.dataset.targets.split(' ').filter(Boolean);
  }

  async load() {
    const option = this.pick.selectedOptions[0];
    if (!option) return;
    const targets = this.targetsOf(option);
    const target = targets.includes(this.target) ? this.target : targets[0];
    for (const b of this.targetsEl.querySelectorAll('[data-change-target]')) {
      b.hidden = !targets.includes(b.dataset.changeTarget);
      b.setAttribute('aria-pressed', String(b.dataset.changeTarget === target));
    }
    const slug = option.value;
    const base = option.dataset.base;
    const key = `${slug} ${target}`;
    if (this.wanted === key) return;
    this.wanted = key;
    this.root.removeAttribute('data-ready');
    let diff, listings;
    try {
      [diff, ...listings] = await Promise.all([getJSON(changeURL(slug, target)),
        getJSON(hloURL(base, target)), getJSON(hloURL(slug, target))]);
    } catch (e) {
      if (this.wanted === key) render(this.summary, html`<p class="fine">Could not load this change: ${e.message}</p>`);
      return;
    }
    if (this.wanted !== key) return;
    this.show(slug, base, target, diff, listings);
  }

  show(slug, base, target, diff, listings) {
    this.pinned = null;
    this.cursor = null;
    this.lit = [];
    this.names.base.textContent = base;
    this.names.changed.textContent = slug;
    if (diff.problem) {
      for (const side of SIDES) this.cols[side].replaceChildren();
      render(this.summary, html`<p class="fine">${diff.problem}</p>`);
      this.rowsEl.replaceChildren();
      this.shown = null;
      this.root.setAttribute('data-ready', '');
      return;
    }
    const index = indexChange(diff);
    const rows = {};
    SIDES.forEach((side, i) => {
      const col = this.cols[side];
      col.scrollTop = 0;
      render(col, listingMarkup('hlo', listings[i].lines));
      rows[side] = col.querySelectorAll('[data-line]');
      for (const [n, [how]] of index.rows[side]) rows[side][n - 1]?.classList.add('dm', MARKS[how]);
    });
    this.shown = { slug, base, target, diff, index, rows };
    this.root.dataset.change = slug;
    this.root.dataset.target = target;
    this.target = target;
    render(this.summary, this.summaryMarkup(diff));
    render(this.rowsEl, this.rowsMarkup(diff));
    this.idle();
    this.root.setAttribute('data-ready', '');
  }

  /** Counts, buffers, aliases and time, each as base → changed. */
  summaryMarkup(d) {
    const line = (what, a, b, shown = (v) => v, words) => html`<tr><th scope="row">${what}</th><td>${shown(a)}</td><td>${shown(b)}</td><td class="fine">${words ?? (a === b ? '' : ratio(a, b))}</td></tr>`;
    const counts = Object.entries(d.counts).filter(([, [a, b]]) => a || b)
      .map(([c, [a, b]]) => line(CATEGORY_WORDS[c] ?? c, a, b, String, a === b ? '' : `${b > a ? '+' : '−'}${Math.abs(b - a)}`));
    const memory = Object.entries(d.memory).filter(([, [a, b]]) => a || b)
      .map(([name, [a, b]]) => line(name.replaceAll('_', ' '), a, b, (n) => si(n, 'B')));
    const time = d.seconds ? line('estimated time', d.seconds[0], d.seconds[1], duration, ratio(d.seconds[0], d.seconds[1], 'longer', 'shorter')) : '';
    return html`<p><b>${d.change}</b>: of the instructions that run, ${d.kept} are alike, ${plural(d.modified.length, 'changed', 'changed')}, ${
      plural(d.appeared.length, 'appeared', 'appeared')} and ${plural(d.vanished.length, 'vanished', 'vanished')}.${
      d.seconds ? '' : html` <span class="fine">No estimated time: this layer's chip has no published peaks (a host CPU's depend on the machine).</span>`}</p>
      <table class="change-table"><thead><tr><th scope="col"></th><th scope="col">as written</th><th scope="col">with the change</th><th scope="col"></th></tr></thead>
      <tbody>${counts}${memory}${line('aliased outputs', d.aliases[0], d.aliases[1], String)}${time}</tbody></table>`;
  }

  /** The rows that appeared, vanished or changed, each a button that shows its line. */
  rowsMarkup(d) {
    const row = (side, r, mark) => html`<li><button type="button" data-change-side="${side}" data-change-line="${r.line}"><span class="key ${mark}">${SIGN[mark]}</span> <span class="count">line ${r.line}</span> <code>%${r.name}</code> <code>${r.shape}</code> ${r.opcode}</button></li>`;
    // A long list (two dozen tuple elements that vanished with a collective) starts folded.
    const list = (title, items) => (!items.length ? '' : items.length > 12
      ? html`<details><summary><h3>${title}</h3></summary><ol>${items}</ol></details>` : html`<h3>${title}</h3><ol>${items}</ol>`);
    return html`${list(`appeared with the change (${d.appeared.length})`, d.appeared.map((r) => row('changed', r, 'add')))}${
      list(`vanished with the change (${d.vanished.length})`, d.vanished.map((r) => row('base', r, 'del')))}${
      list(`the same work, changed (${d.modified.length})`, d.modified.map((m) => html`<li><button type="button" data-change-side="changed" data-change-line="${m.changed.line}"><span class="key mod">~</span> <span class="count">line ${m.base.line} → ${m.changed.line}</span> <code>%${m.base.name}</code> ${m.base.opcode} <code>${m.base.shape}</code> → <code>%${m.changed.name}</code> <code>${m.changed.shape}</code></button></li>`))}${
      d.appeared.length + d.vanished.length + d.modified.length ? '' : html`<p class="fine">Every instruction that runs is alike in both compiles.</p>`}`;
  }

  idle() {
    this.status.replaceChildren(...this.idleNodes.map((n) => n.cloneNode(true)));
  }

  clear() {
    for (const row of this.lit) row.classList.remove('on');
    this.lit = [];
  }

  /** Light what line `n` of `side` computes on both sides; scroll the other side to it; say what it is. */
  light(side, n, scrollOwn = false) {
    const { diff, index, rows } = this.shown;
    this.clear();
    const lit = litBy(diff, index, side, n);
    for (const s of SIDES) {
      for (const m of lit[s]) {
        const row = rows[s][m - 1];
        if (row) { row.classList.add('on'); this.lit.push(row); }
      }
    }
    const other = side === 'base' ? 'changed' : 'base';
    const first = rows[other][(lit[other][0] ?? 0) - 1];
    if (first) scrollIntoBox(this.cols[other], first);
    if (scrollOwn && rows[side][n - 1]) scrollIntoBox(this.cols[side], rows[side][n - 1]);
    this.describe(side, n, lit);
  }

  describe(side, n, lit) {
    const { diff, index } = this.shown;
    const [how, row] = index.rows[side].get(n) ?? [];
    const eqns = [...new Set((index.pairs[side].get(n) ?? []).map((k) => diff.eqns[k]))];
    const which = side === 'base' ? 'as written' : 'with the change';
    const what = { appeared: 'appeared with the change', vanished: 'vanished with the change', modified: 'the same work, changed' }[how];
    const names = eqns.map((p) => `${p.primitive} (${p.base === null ? 'new with the change' : `equation ${p.base}`})`);
    const other = side === 'base' ? 'changed' : 'base';
    render(this.status, html`<span class="tag">${which} ${n}</span> ${row ? html`<code>%${row.name}</code> ${row.opcode} · ` : ''}${
      what ? html`<b>${what}</b> · ` : ''}${names.length ? `computes ${names.slice(0, 6).join(', ')}${names.length > 6 ? ` and ${names.length - 6} more` : ''}`
      : "no equation's work: the compiler's own"}${lit[other].length ? ` · ${plural(lit[other].length, 'line')} on the other side` : ''}${
      this.pinned ? html` <span class="fine">pinned · Esc unpins</span>` : ''}`);
  }

  leave() {
    if (this.pinned) { this.light(this.pinned.side, this.pinned.n); return; }
    this.clear();
    this.idle();
  }

  wire() {
    this.pick.addEventListener('change', () => this.load());
    this.targetsEl.addEventListener('click', (e) => {
      const t = e.target.closest('[data-change-target]')?.dataset.changeTarget;
      if (t) { this.target = t; this.load(); }
    });
    for (const side of SIDES) {
      const col = this.cols[side];
      col.addEventListener('mouseover', (e) => {
        const row = e.target.closest('[data-line]');
        if (row && this.shown && !this.pinned) this.light(side, Number(row.dataset.line));
      });
      col.addEventListener('mouseleave', () => { if (this.shown) this.leave(); });
      col.addEventListener('click', (e) => {
        const row = e.target.closest('[data-line]');
        if (!row || !this.shown || e.target.closest('a')) return;
        const n = Number(row.dataset.line);
        this.pinned = this.pinned?.side === side && this.pinned.n === n ? null : { side, n };
        this.root.toggleAttribute('data-pinned', Boolean(this.pinned));
        this.light(side, n);
      });
      col.addEventListener('keydown', (e) => {
        if (!this.shown) return;
        const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 16, PageUp: -16 }[e.key];
        if (!step) return;
        e.preventDefault();
        const count = this.shown.rows[side].length;
        const from = this.cursor?.side === side ? this.cursor.n : 0;
        const n = Math.max(1, Math.min(count, from + step));
        this.shown.rows[this.cursor?.side]?.[this.cursor.n - 1]?.classList.remove('cur');
        this.cursor = { side, n };
        this.shown.rows[side][n - 1].classList.add('cur');
        this.light(side, n, true);
      });
    }
    const fromButton = (e) => {
      const b = e.target.closest('[data-change-line]');
      if (b && this.shown) this.light(b.dataset.changeSide, Number(b.dataset.changeLine), true);
    };
    this.rowsEl.addEventListener('click', fromButton);
    this.rowsEl.addEventListener('focusin', fromButton);
    document.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.pinned && !typing(e) && onScreen(this.root)) {
        this.pinned = null;
        this.root.removeAttribute('data-pinned');
        this.leave();
      }
    });
  }
}

/** Wire the "one change" section and show the first change. */
export function registerChange(root) {
  const section = new ChangeSection(root);
  section.wire();
  section.load();
  return section;
}
