// Drill 04, the x-ray: a program's jaxpr and StableHLO side by side, linked equation by equation.
// Everything that depends on the listing's length is computed once per program; a hover only
// touches the lines of the groups it lights.
import { html, render } from './html.js';
import { getJSON, listing, onScreen, programURL, typing } from './data.js';
import { scrollWithin } from './drill.js';

const BANDS = 8;
const LAYERS = ['jaxpr', 'stablehlo'];
const CHUNK = 64;

/** Copy a listing for a column, its lines grouped in blocks the browser can skip while off screen. */
function columnCopy(source) {
  if (!source) return document.createTextNode('');
  const copy = source.cloneNode(true);
  const code = copy.firstElementChild;
  const lines = [...code.children];
  if (lines.length > CHUNK) {
    const blocks = [];
    for (let i = 0; i < lines.length; i += CHUNK) {
      const block = document.createElement('span');
      block.className = 'chunk';
      block.append(...lines.slice(i, i + CHUNK));
      blocks.push(block);
    }
    code.replaceChildren(...blocks);
  }
  return copy;
}

/** Line-to-group maps and the groups to light per line (the innermost equations only). */
export function indexProgram(program) {
  const groups = program.xray || [];
  const eqns = new Map(program.eqns.map((e) => [e.id, e]));
  const ancestors = groups.map((g) => {
    const out = new Set();
    for (let e = eqns.get(g.eqn); e && e.parent !== null && e.parent !== undefined; e = eqns.get(e.parent)) out.add(e.parent);
    return out;
  });
  const byLine = { jaxpr: new Map(), stablehlo: new Map() };
  groups.forEach((g, i) => {
    for (const n of g.jaxpr_lines) (byLine.jaxpr.get(n) ?? byLine.jaxpr.set(n, []).get(n)).push(i);
    for (const n of g.stablehlo_lines) (byLine.stablehlo.get(n) ?? byLine.stablehlo.set(n, []).get(n)).push(i);
  });
  const memo = { jaxpr: new Map(), stablehlo: new Map() };
  /** The groups a line lights: those holding it, minus any container of another one. */
  function lit(layer, n) {
    if (memo[layer].has(n)) return memo[layer].get(n);
    const all = byLine[layer].get(n) ?? [];
    const out = all.filter((i) => !all.some((j) => j !== i && ancestors[j].has(groups[i].eqn)));
    memo[layer].set(n, out);
    return out;
  }
  // The innermost equation printed on each jaxpr line, to explain lines no group holds.
  const owner = new Map();
  for (const e of program.eqns) {
    const [a, b] = e.jaxpr_lines;
    for (let n = a; n <= b; n++) {
      const o = owner.get(n);
      if (!o || o.jaxpr_lines[1] - o.jaxpr_lines[0] >= b - a) owner.set(n, e);
    }
  }
  const order = groups.map((g, i) => i).sort((i, j) =>
    Math.min(...groups[i].jaxpr_lines) - Math.min(...groups[j].jaxpr_lines) || groups[i].eqn - groups[j].eqn);
  return { groups, eqns, byLine, lit, owner, order };
}

/** "N mapped equations · a of b jaxpr lines · c of d StableHLO op lines", computed from the groups. */
export function stats(program) {
  const groups = program.xray || [];
  const mapped = new Set(groups.filter((g) => g.stablehlo_lines.length).map((g) => g.eqn));
  const jaxprLines = new Set(groups.flatMap((g) => g.jaxpr_lines));
  const opLines = new Set((program.stablehlo_ops || []).map((o) => o.line));
  const covered = new Set(groups.flatMap((g) => g.stablehlo_lines).filter((n) => opLines.has(n)));
  const none = (program.lowered_to_nothing || []).length;
  const plural = (n, w) => `${n} ${w}${n === 1 ? '' : 's'}`;
  return [
    `${plural(mapped.size, 'mapped equation')} of ${program.eqns.length}`,
    `${jaxprLines.size} of ${program.jaxpr.split('\n').length} jaxpr lines`,
    `${covered.size} of ${opLines.size} StableHLO op lines`,
    none ? `${none} lowered to nothing` : '',
  ].filter(Boolean).join(' · ');
}

const STRUCTURE = [
  [/^module\b/, 'the module header: a container, not an operation'],
  [/^func\.func\b/, 'a function signature; its arguments are values, not work'],
  [/^(return|stablehlo\.return|sdy\.return|func\.return)\b/, 'hands values back; computes nothing'],
  [/^\}/, 'closes a block'],
  [/^sdy\.mesh\b/, 'declares the device mesh; no equation emits it'],
  [/^(\^bb|reducer\()/, "names a region's block arguments"],
];

/** Why a line belongs to no group. */
export function whyUnmapped(index, program, layer, n, text) {
  const t = text.trim();
  if (!t) return 'an empty line';
  if (layer === 'stablehlo') {
    for (const [re, why] of STRUCTURE) if (re.test(t)) return `structural line: ${why}`;
    return 'no equation claims this line';
  }
  const e = index.owner.get(n);
  if (e) {
    const gone = (program.lowered_to_nothing || []).find((x) => x.eqn === e.id);
    if (gone) return `lowered to nothing: ${e.primitive} (equation ${e.id}): ${gone.why}`;
    return `equation ${e.id} (${e.primitive}) emits no StableHLO line of its own`;
  }
  if (n === 1) return "structural line: the jaxpr's header and input binders";
  if (/^in \(/.test(t) || /^in \(.*\}\s*$/.test(t)) return 'structural line: the list of results';
  return 'structural line: binders of a (sub-)jaxpr; no equation prints here';
}

/** Wire the x-ray section. */
export function registerXray(root) {
  const pick = root.querySelector('[data-xray-pick]');
  const statsEl = root.querySelector('[data-xray-stats]');
  const status = root.querySelector('[data-xray-status]');
  const cols = Object.fromEntries(LAYERS.map((l) => [l, root.querySelector(`[data-xray-col="${l}"]`)]));
  const idleNodes = [...status.childNodes].map((n) => n.cloneNode(true));
  const idle = () => status.replaceChildren(...idleNodes.map((n) => n.cloneNode(true)));
  let state = null;   // {slug, program, index, rows}
  let lit = [];       // elements currently lit
  let pinned = null;  // group indices pinned, or null
  let hovered = null; // last hovered row
  let step = -1;      // position in index.order for j/k
  let loading = null;

  async function load(slug) {
    if (state?.slug === slug) return;
    loading = slug;
    root.removeAttribute('data-ready');
    let program;
    try {
      program = await getJSON(programURL(slug));
    } catch (e) {
      statsEl.textContent = `could not load ${slug}: ${e.message}`;
      return;
    }
    if (loading !== slug) return;
    const rows = {};
    // Reset scrolling before any swap: a scrollTop write after one would force a layout of the new listing.
    for (const layer of LAYERS) cols[layer].scrollTop = 0;
    for (const layer of LAYERS) {
      const source = listing(slug, layer);
      cols[layer].replaceChildren(columnCopy(source));
      rows[layer] = cols[layer].querySelectorAll('[data-line]');
    }
    const index = indexProgram(program);
    for (const layer of LAYERS) {
      const r = rows[layer];
      for (let n = 1; n <= r.length; n++) {
        const groups = index.lit(layer, n);
        if (groups.length) r[n - 1].classList.add('m', `b${groups[0] % BANDS}`);
        else r[n - 1].classList.add('u');
      }
    }
    state = { slug, program, index, rows };
    lit = [];
    pinned = null;
    hovered = null;
    step = -1;
    statsEl.textContent = stats(program);
    if ((program.xray || []).length) idle();
    else render(status, html`This program has no x-ray groups yet: every line shows dimmed.`);
    root.dataset.program = slug;
    root.setAttribute('data-ready', '');
  }

  function light(groups, from) {
    for (const el of lit) el.classList.remove('on');
    lit = [];
    const { index, rows } = state;
    for (const i of groups) {
      const g = index.groups[i];
      for (const n of g.jaxpr_lines) rows.jaxpr[n - 1] && lit.push(rows.jaxpr[n - 1]);
      for (const n of g.stablehlo_lines) rows.stablehlo[n - 1] && lit.push(rows.stablehlo[n - 1]);
    }
    for (const el of lit) el.classList.add('on');
    if (groups.length) {
      const g = index.groups[groups[0]];
      for (const layer of LAYERS) {
        if (layer === from) continue;
        const first = rows[layer][Math.min(...g[`${layer}_lines`]) - 1];
        if (first) scrollWithin(cols[layer], first);
      }
    }
  }

  function describe(groups, layer, n) {
    const { index, program, rows } = state;
    if (!groups.length) {
      const row = rows[layer][n - 1];
      const why = whyUnmapped(index, program, layer, n, row.textContent);
      row.title = why;
      render(status, html`<span class="tag">${layer === 'jaxpr' ? 'jaxpr' : 'StableHLO'} ${n}</span> ${why}`);
      return;
    }
    render(status, html`${groups.map((i) => {
      const g = index.groups[i];
      const e = index.eqns.get(g.eqn);
      const op = rows.jaxpr[e.jaxpr_lines[0] - 1]?.querySelector('a.o');
      const span = (lines, name) => lines.length ? html`${name} ${lines.length > 1 ? `${Math.min(...lines)}–${Math.max(...lines)}` : lines[0]}` : html`${name}: none`;
      return html`<span class="grp b${i % BANDS}">equation ${e.id} · ${op ? html`<a href="${op.getAttribute('href')}">${e.primitive}</a>` : e.primitive} · ${span(g.jaxpr_lines, 'jaxpr')} · ${span(g.stablehlo_lines, 'StableHLO')} (${g.stablehlo_lines.length} ${g.stablehlo_lines.length === 1 ? 'line' : 'lines'})</span>`;
    })}${pinned ? html` <span class="fine">pinned · Esc unpins</span>` : ''}`);
  }

  function hover(layer, row) {
    if (!state || row === hovered) return;
    hovered = row;
    if (pinned) return;
    const n = Number(row.dataset.line);
    const groups = state.index.lit(layer, n);
    light(groups, layer);
    describe(groups, layer, n);
  }

  function pin(groups, layer, n) {
    pinned = groups.length ? groups : null;
    root.toggleAttribute('data-pinned', Boolean(pinned));
    light(groups, layer);
    describe(groups, layer, n);
  }

  for (const layer of LAYERS) {
    const col = cols[layer];
    col.addEventListener('mouseover', (e) => {
      const row = e.target.closest('[data-line]');
      if (row) hover(layer, row);
    });
    col.addEventListener('mouseleave', () => {
      hovered = null;
      if (!pinned && state) { light([], null); idle(); }
    });
    col.addEventListener('click', (e) => {
      const row = e.target.closest('[data-line]');
      if (!row || !state) return;
      if (e.target.closest('a') && (e.ctrlKey || e.metaKey)) return;
      e.preventDefault();
      const n = Number(row.dataset.line);
      const groups = state.index.lit(layer, n);
      const same = pinned && groups.length === pinned.length && groups.every((g, i) => g === pinned[i]);
      if (same) { pinned = null; root.removeAttribute('data-pinned'); describe(groups, layer, n); return; }
      step = state.index.order.indexOf(groups[0]);
      pin(groups, layer, n);
    });
  }

  function walk(delta) {
    if (!state || !state.index.order.length) return;
    const order = state.index.order;
    step = step < 0 ? (delta > 0 ? 0 : order.length - 1) : (step + delta + order.length) % order.length;
    const g = order[step];
    pin([g], null, state.index.groups[g].jaxpr_lines[0]);
  }

  document.addEventListener('keydown', (e) => {
    if (typing(e) || !state || !onScreen(root)) return;
    if (e.key === 'j') { e.preventDefault(); walk(1); }
    else if (e.key === 'k') { e.preventDefault(); walk(-1); }
    else if (e.key === 'Escape' && pinned) { pinned = null; root.removeAttribute('data-pinned'); light([], null); idle(); }
  });

  pick.addEventListener('change', () => load(pick.value));
  document.addEventListener('click', (e) => {
    const open = e.target.closest('[data-xray-open]');
    if (!open) return;
    pick.value = open.dataset.xrayOpen;
    load(pick.value);
  });
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((en) => en.isIntersecting)) { seen.disconnect(); load(pick.value); }
  }, { rootMargin: '600px 0px' });
  seen.observe(root);
  return { load };
}
