// The x-ray's hover, the one copy of it: which groups each line lights, and lighting them in every
// column (hover lights, click pins, j/k walk). The page's x-ray section and the notebook view both run
// this file; the notebook inlines it, so it imports nothing but scroll.js and keeps to `import {…}` lines.
import { scrollTarget, settleScroll } from './scroll.js';

export const LAYERS = ['jaxpr', 'stablehlo', 'hlo'];

/** The first line of a list (no spread: a container's list can be long). */
export function first(lines) {
  let m = Infinity;
  for (const n of lines) if (n < m) m = n;
  return m;
}

/** Line-to-group maps and the groups to light per line (the innermost equations only). A group's
 * compiled lines are its equation's `hlo.lines_by_eqn` entry: a fusion's line is listed there for
 * every equation it absorbed, so hovering it lights all of them. */
export function indexGroups(program) {
  const groups = program.xray || [];
  const eqns = new Map(program.eqns.map((e) => [e.id, e]));
  const ancestors = groups.map((g) => {
    const out = new Set();
    for (let e = eqns.get(g.eqn); e && e.parent !== null && e.parent !== undefined; e = eqns.get(e.parent)) out.add(e.parent);
    return out;
  });
  const compiledLines = program.hlo?.lines_by_eqn ?? {};
  const lines = groups.map((g) => ({
    jaxpr: g.jaxpr_lines, stablehlo: g.stablehlo_lines, hlo: compiledLines[String(g.eqn)] ?? [],
  }));
  const byLine = { jaxpr: new Map(), stablehlo: new Map(), hlo: new Map() };
  lines.forEach((l, i) => {
    for (const layer of LAYERS) for (const n of l[layer]) (byLine[layer].get(n) ?? byLine[layer].set(n, []).get(n)).push(i);
  });
  const groupOf = new Map(groups.map((g, i) => [g.eqn, i]));
  const memo = { jaxpr: new Map(), stablehlo: new Map(), hlo: new Map() };
  /** The groups a line lights: those holding it, minus any container of another one. */
  function lit(layer, n) {
    if (memo[layer].has(n)) return memo[layer].get(n);
    const all = byLine[layer].get(n) ?? [];
    // One pass over the holders' ancestors, not a pair test: a fusion line can hold hundreds of groups.
    const containers = new Set();
    for (const j of all) for (const a of ancestors[j]) containers.add(a);
    const out = all.filter((i) => !containers.has(groups[i].eqn));
    memo[layer].set(n, out);
    return out;
  }
  const order = groups.map((g, i) => i).sort((i, j) =>
    Math.min(...groups[i].jaxpr_lines) - Math.min(...groups[j].jaxpr_lines) || groups[i].eqn - groups[j].eqn);
  return { groups, lines, groupOf, eqns, byLine, lit, order };
}

const NOTHING = { groups: [], body: null };

/** One x-ray view's lighting: the program on show (its index and line elements), what is lit, what is
 * pinned, and where j/k stands. `describe(groups, layer, n)` and `idle()` tell the reader about it. */
export class Lights {
  constructor(root, cols, { describe = () => {}, idle = () => {} } = {}) {
    this.root = root;
    this.cols = cols;         // layer -> its scrolling column
    this.describe = describe;
    this.idle = idle;
    this.view = null;         // what `show` was given
    this.reset();
  }

  /** Forget what is lit and pinned (a new program is on show). */
  reset() {
    this.lit = [];      // elements lit
    this.marked = [];   // compiled lines of the fusion body on show
    this.pinned = null; // group indices pinned, or null
    this.hovered = null;
    this.step = -1;     // position in index.order for j/k
    this.root.removeAttribute('data-pinned');
  }

  /** Show a program: its index (from `indexGroups`), each layer's line elements (empty for a layer not
   * shown) and its fusions' bodies. */
  show(index, rows, bodies = null) {
    this.view = { index, rows, bodies };
    this.reset();
  }

  /** What a line lights: its groups, and for a fusion line the body of the computation it calls. */
  target(layer, n) {
    const groups = this.view.index.lit(layer, n);
    const body = layer === 'hlo' ? this.view.bodies?.get(n)?.lines ?? null : null;
    return { groups, body };
  }

  /** Light `groups` in every column, mark a fusion's `body`, and scroll the columns other than `from`
   * to them (to `focus[layer]` where given). */
  light({ groups, body }, from, focus = null) {
    for (const el of this.lit) el.classList.remove('on');
    for (const el of this.marked) el.classList.remove('fb');
    const { index, rows } = this.view;
    const lit = [];
    const marked = [];
    for (const i of groups) {
      for (const layer of LAYERS) for (const n of index.lines[i][layer]) rows[layer][n - 1] && lit.push(rows[layer][n - 1]);
    }
    for (const n of body ?? []) rows.hlo[n - 1] && marked.push(rows.hlo[n - 1]);
    for (const el of lit) el.classList.add('on');
    for (const el of marked) el.classList.add('fb');
    this.lit = lit;
    this.marked = marked;
    if (groups.length || focus) this.follow(groups, from, focus);
  }

  /** Scroll each column but `from` to the first line of `groups` there, if it is out of view. */
  follow(groups, from, focus) {
    const { index, rows } = this.view;
    const targets = [];
    for (const layer of LAYERS) {
      if (layer === from || !rows[layer].length) continue;
      const n = focus?.[layer] ?? first(groups.flatMap((i) => index.lines[i][layer]));
      if (rows[layer][n - 1]) targets.push([layer, rows[layer][n - 1]]);
    }
    // Every position is read before any column scrolls, so the hover forces one layout, not one per column.
    const moves = targets.map(([layer, row]) => scrollTarget(this.cols[layer], row));
    moves.forEach((move, i) => settleScroll(move, targets[i][1]));
  }

  /** Light what `row` of `layer` lights, unless a group is pinned. */
  hover(layer, row, from = layer, focus = null) {
    if (!this.view || row === this.hovered) return;
    this.hovered = row;
    if (this.pinned) return;
    const n = Number(row.dataset.line);
    const t = this.target(layer, n);
    this.light(t, from, focus);
    this.describe(t.groups, layer, n);
  }

  /** The pointer left a column: unlight, unless a group is pinned. */
  leave() {
    this.hovered = null;
    if (!this.pinned && this.view) { this.light(NOTHING, null); this.idle(); }
  }

  /** Pin what line `n` of `layer` lights (with no layer: the group at `step`). */
  pin(layer, n, from = layer, focus = null) {
    const t = layer ? this.target(layer, n) : { groups: [this.view.index.order[this.step]], body: null };
    this.pinned = t.groups.length ? t.groups : null;
    this.root.toggleAttribute('data-pinned', Boolean(this.pinned));
    this.light(t, from, focus);
    this.describe(t.groups, layer, n);
  }

  unpin() {
    this.pinned = null;
    this.root.removeAttribute('data-pinned');
    this.light(NOTHING, null);
    this.idle();
  }

  /** A click pins what a line lights; clicking the pinned group again releases it. */
  click(layer, n, from = layer, focus = null) {
    const groups = this.view.index.lit(layer, n);
    const pinned = this.pinned;
    if (pinned && groups.length === pinned.length && groups.every((g, i) => g === pinned[i])) {
      this.pinned = null;
      this.root.removeAttribute('data-pinned');
      this.describe(groups, layer, n);
      return;
    }
    this.step = this.view.index.order.indexOf(groups[0]);
    this.pin(layer, n, from, focus);
  }

  /** j/k: pin the next (`delta` 1) or previous (-1) group in jaxpr order, wrapping. */
  walk(delta) {
    const order = this.view?.index.order;
    if (!order?.length) return;
    const step = this.step;
    this.step = step < 0 ? (delta > 0 ? 0 : order.length - 1) : (step + delta + order.length) % order.length;
    this.pin(null, this.view.index.groups[order[this.step]].jaxpr_lines[0], null);
  }

  /** Hovering a line of `col` lights what it lights; leaving the column unlights. */
  watch(col, layer) {
    col.addEventListener('mouseover', (e) => {
      const row = e.target.closest('[data-line]');
      if (row) this.hover(layer, row);
    });
    col.addEventListener('mouseleave', () => this.leave());
  }
}
