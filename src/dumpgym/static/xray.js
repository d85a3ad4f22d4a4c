// Drill 04, the x-ray: a program's jaxpr, StableHLO and (when it has one) compiled HLO side by side,
// linked equation by equation. Everything that depends on the listing's length is computed once per
// program; a hover only touches the lines of the groups it lights.
import { html, render } from './html.js';
import { getJSON, listing, onScreen, programURL, typing } from './data.js';
import { backendNote, compiledStats, fusionList, hloListing, indexCompiled, whyCompiled } from './compiled.js';
import { LAYERS, NAMES, first, indexProgram, stats, where, whyUnmapped } from './xray-index.js';

const BANDS = 8;
const CHUNK = 64;

/** Copy a listing for a column (or take a fresh one), its lines grouped in blocks the browser can skip while off screen. */
function columnCopy(source, fresh = false) {
  if (!source) return document.createTextNode('');
  const copy = fresh ? source : source.cloneNode(true);
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

/** Where `box` should scroll to bring `child` into view (a third of the way down), or null if it is in view. */
function scrollTarget(box, child) {
  // Measured against the box, not offsetTop: a line's offsetParent may be a block between them.
  const top = child.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  const inView = top >= box.scrollTop && top + child.offsetHeight <= box.scrollTop + box.clientHeight;
  return inView ? null : { box, top: top - box.clientHeight / 3 };
}

/** Wire the x-ray section. */
export function registerXray(root) {
  const pick = root.querySelector('[data-xray-pick]');
  const statsEl = root.querySelector('[data-xray-stats]');
  const status = root.querySelector('[data-xray-status]');
  const compiledEl = root.querySelector('[data-xray-compiled]');
  const byEl = root.querySelector('[data-xray-backend]');
  const cols = Object.fromEntries(LAYERS.map((l) => [l, root.querySelector(`[data-xray-col="${l}"]`)]));
  const hloCol = cols.hlo.closest('.col');
  const idleNodes = [...status.childNodes].map((n) => n.cloneNode(true));
  const idle = () => status.replaceChildren(...idleNodes.map((n) => n.cloneNode(true)));
  let state = null;   // {slug, program, index, compiled, rows}
  let lit = [];       // elements currently lit
  let marked = [];    // compiled lines of the fusion body on show
  let pinned = null;  // group indices pinned, or null
  let hovered = null; // last hovered row
  let step = -1;      // position in index.order for j/k
  let loading = null;  // the slug the section should end up showing
  let inflight = null; // {slug, promise} of the load under way

  /** The compiled listing as an element, or the reason it could not be fetched. */
  async function compiledSource(slug, program) {
    if (!program.hlo?.text) return { source: null, error: '' };
    try {
      const holder = document.createElement('div');
      render(holder, await hloListing(slug));
      return { source: holder.firstElementChild, error: '' };
    } catch (e) {
      return { source: null, error: e.message };
    }
  }

  /** Show a program; asking again for the one being loaded waits for that load (the picker and the
   * section coming into view both ask), and asking for the one on show cancels any other load. */
  function load(slug) {
    if (inflight?.slug === slug) return inflight.promise;
    loading = slug;
    if (state?.slug === slug) {
      inflight = null;
      root.setAttribute('data-ready', '');
      return Promise.resolve();
    }
    const promise = show(slug).finally(() => { if (inflight?.promise === promise) inflight = null; });
    inflight = { slug, promise };
    return promise;
  }

  async function show(slug) {
    root.removeAttribute('data-ready');
    let program;
    try {
      program = await getJSON(programURL(slug));
    } catch (e) {
      if (loading === slug) statsEl.textContent = `could not load ${slug}: ${e.message}`;
      return;
    }
    const { source: hloSource, error } = await compiledSource(slug, program);
    if (loading !== slug) return;
    const rows = { jaxpr: [], stablehlo: [], hlo: [] };
    // Reset scrolling before any swap: a scrollTop write after one would force a layout of the new listing.
    for (const layer of LAYERS) cols[layer].scrollTop = 0;
    for (const layer of LAYERS) {
      const copy = layer === 'hlo' ? columnCopy(hloSource, true) : columnCopy(listing(slug, layer));
      cols[layer].replaceChildren(copy);
      rows[layer] = cols[layer].querySelectorAll('[data-line]');
    }
    root.toggleAttribute('data-compiled', Boolean(hloSource));
    hloCol.hidden = !hloSource;
    const index = indexProgram(program);
    const compiled = hloSource ? indexCompiled(program.hlo) : null;
    for (const layer of LAYERS) {
      const r = rows[layer];
      for (let n = 1; n <= r.length; n++) {
        const groups = index.lit(layer, n);
        if (groups.length) r[n - 1].classList.add('m', `b${groups[0] % BANDS}`);
        else if (layer === 'hlo' && compiled.instructions.get(n)?.eqns.length === 0) r[n - 1].classList.add('x');
        else r[n - 1].classList.add('u');
        if (layer === 'hlo' && compiled.fusions.has(n)) r[n - 1].classList.add('fz');
      }
    }
    state = { slug, program, index, compiled, rows };
    lit = [];
    marked = [];
    pinned = null;
    hovered = null;
    step = -1;
    root.removeAttribute('data-pinned');
    statsEl.textContent = stats(program);
    showCompiled(program, index, error);
    if ((program.xray || []).length) idle();
    else render(status, html`This program has no x-ray groups yet: every line shows dimmed.`);
    root.dataset.program = slug;
    root.setAttribute('data-ready', '');
  }

  /** The backend, the counts and the fusion list under the columns; or why there is no compiled column. */
  function showCompiled(program, index, error) {
    const hlo = program.hlo;
    if (!state.compiled) {
      byEl.textContent = '';
      render(compiledEl, error
        ? html`<p class="fine">Could not load the compiled HLO (${error}).</p>`
        : html`<p class="fine">No compiled layer for this program: added programs carry one when added with <code>--hlo</code>.</p>`);
      return;
    }
    byEl.textContent = `XLA · ${hlo.backend}`;
    byEl.title = `${backendNote(hlo)}${hlo.host ? ` · host ${hlo.host}` : ''}`;
    render(compiledEl, html`<p class="note" data-xray-hlo-note>${backendNote(hlo)}.
      <span class="stats" data-xray-hlo-stats>${compiledStats(hlo)}</span>
      <span class="legend"><span class="key fz">bold number</span> a fusion (hover it: every equation it absorbed lights) · <span class="key x">dotted</span> XLA's own</span></p>
      ${hlo.fusions.length ? fusionList(hlo, index.groupOf, index.eqns, (g) => g % BANDS) : ''}`);
  }

  /** What a line lights: its groups, and for a fusion line the body of the computation it calls. */
  function target(layer, n) {
    const groups = state.index.lit(layer, n);
    const body = layer === 'hlo' ? state.compiled.bodies.get(n)?.lines ?? null : null;
    return { groups, body };
  }

  function light({ groups, body }, from, focus = null) {
    for (const el of lit) el.classList.remove('on');
    for (const el of marked) el.classList.remove('fb');
    lit = [];
    marked = [];
    const { index, rows } = state;
    for (const i of groups) {
      for (const layer of LAYERS) for (const n of index.lines[i][layer]) rows[layer][n - 1] && lit.push(rows[layer][n - 1]);
    }
    for (const n of body ?? []) rows.hlo[n - 1] && marked.push(rows.hlo[n - 1]);
    for (const el of lit) el.classList.add('on');
    for (const el of marked) el.classList.add('fb');
    if (!groups.length && !focus) return;
    const targets = [];
    for (const layer of LAYERS) {
      if (layer === from || !rows[layer].length) continue;
      const n = focus?.[layer] ?? first(groups.flatMap((i) => index.lines[i][layer]));
      if (rows[layer][n - 1]) targets.push([layer, rows[layer][n - 1]]);
    }
    // Every position is read before any column scrolls, so the hover forces one layout, not one per column.
    const moves = targets.map(([layer, row]) => scrollTarget(cols[layer], row));
    for (const move of moves) if (move) move.box.scrollTop = move.top;
  }

  function chip(i, short) {
    const { index, rows, compiled } = state;
    const e = index.eqns.get(index.groups[i].eqn);
    const l = index.lines[i];
    const op = rows.jaxpr[e.jaxpr_lines[0] - 1]?.querySelector('a.o');
    const name = op ? html`<a href="${op.getAttribute('href')}">${e.primitive}</a>` : e.primitive;
    if (short) return html`<span class="grp b${i % BANDS}">${name} · ${where(l.jaxpr, 'jaxpr')}</span>`;
    return html`<span class="grp b${i % BANDS}">equation ${e.id} · ${name} · ${where(l.jaxpr, 'jaxpr')} · ${where(l.stablehlo, 'stablehlo')} (${l.stablehlo.length} ${l.stablehlo.length === 1 ? 'line' : 'lines'})${
      compiled ? html` · ${where(l.hlo, 'hlo')}` : ''}</span>`;
  }

  function describe(groups, layer, n) {
    const { index, program, rows, compiled } = state;
    const row = layer && rows[layer][n - 1];
    const tag = layer ? html`<span class="tag">${NAMES[layer]} ${n}</span> ` : '';
    const pin = pinned ? html` <span class="fine">pinned · Esc unpins</span>` : '';
    const fusion = layer === 'hlo' ? compiled.fusions.get(n) : null;
    if (fusion) {
      const body = compiled.bodies.get(n);
      const head = html`${tag}fusion <code>%${fusion.name}</code> <span class="tag">${fusion.kind}</span>${body ? html` runs %${body.name}` : ''}`;
      if (!fusion.eqns.length) {
        row.title = whyCompiled(compiled, n, row.textContent);
        render(status, html`${head}: <span class="own">XLA's own: no equation wrote this</span>${pin}`);
      } else {
        render(status, html`${head}, absorbing ${fusion.eqns.length} ${fusion.eqns.length === 1 ? 'equation' : 'equations'}: ${
          groups.map((i) => chip(i, groups.length > 3))}${pin}`);
      }
      return;
    }
    if (!groups.length) {
      const why = layer === 'hlo' ? whyCompiled(compiled, n, row.textContent) : whyUnmapped(index, program, layer, n, row.textContent);
      row.title = why;
      render(status, html`${tag}${why}`);
      return;
    }
    render(status, html`${groups.map((i) => chip(i, groups.length > 3))}${pin}`);
  }

  function hover(layer, row, from = layer, focus = null) {
    if (!state || row === hovered) return;
    hovered = row;
    if (pinned) return;
    const n = Number(row.dataset.line);
    const t = target(layer, n);
    light(t, from, focus);
    describe(t.groups, layer, n);
  }

  function pin(layer, n, from = layer, focus = null) {
    const t = layer ? target(layer, n) : { groups: [state.index.order[step]], body: null };
    pinned = t.groups.length ? t.groups : null;
    root.toggleAttribute('data-pinned', Boolean(pinned));
    light(t, from, focus);
    describe(t.groups, layer, n);
  }

  function unpin() {
    pinned = null;
    root.removeAttribute('data-pinned');
    light({ groups: [], body: null }, null);
    idle();
  }

  function click(layer, n, from = layer, focus = null) {
    const groups = state.index.lit(layer, n);
    const same = pinned && groups.length === pinned.length && groups.every((g, i) => g === pinned[i]);
    if (same) { pinned = null; root.removeAttribute('data-pinned'); describe(groups, layer, n); return; }
    step = state.index.order.indexOf(groups[0]);
    pin(layer, n, from, focus);
  }

  for (const layer of LAYERS) {
    const col = cols[layer];
    col.addEventListener('mouseover', (e) => {
      const row = e.target.closest('[data-line]');
      if (row) hover(layer, row);
    });
    col.addEventListener('mouseleave', () => {
      hovered = null;
      if (!pinned && state) { light({ groups: [], body: null }, null); idle(); }
    });
    col.addEventListener('click', (e) => {
      const row = e.target.closest('[data-line]');
      if (!row || !state) return;
      if (e.target.closest('a') && (e.ctrlKey || e.metaKey)) return;
      e.preventDefault();
      click(layer, Number(row.dataset.line));
    });
  }

  // The fusion list acts like its fusion's line: hover or focus lights, click pins; all three columns follow.
  const fusionRow = (e) => {
    const button = e.target.closest('[data-fusion-line]');
    const n = Number(button?.dataset.fusionLine);
    return state?.compiled && state.rows.hlo[n - 1] ? [n, state.rows.hlo[n - 1]] : [0, null];
  };
  // The compiled column scrolls to the fusion's body, where its absorbed instructions and XLA's own sit together.
  const bodyStart = (n) => ({ hlo: state.compiled.bodies.get(n)?.lines[0] ?? n });
  const showFusion = (e) => {
    const [n, row] = fusionRow(e);
    if (row) hover('hlo', row, null, bodyStart(n));
  };
  compiledEl.addEventListener('mouseover', showFusion);
  compiledEl.addEventListener('focusin', showFusion);
  compiledEl.addEventListener('mouseleave', () => {
    hovered = null;
    if (!pinned && state) { light({ groups: [], body: null }, null); idle(); }
  });
  compiledEl.addEventListener('click', (e) => {
    const [n, row] = fusionRow(e);
    if (row) click('hlo', n, null, bodyStart(n));
  });

  function walk(delta) {
    if (!state || !state.index.order.length) return;
    const order = state.index.order;
    step = step < 0 ? (delta > 0 ? 0 : order.length - 1) : (step + delta + order.length) % order.length;
    pin(null, state.index.groups[order[step]].jaxpr_lines[0], null);
  }

  document.addEventListener('keydown', (e) => {
    if (typing(e) || !state || !onScreen(root)) return;
    if (e.key === 'j') { e.preventDefault(); walk(1); }
    else if (e.key === 'k') { e.preventDefault(); walk(-1); }
    else if (e.key === 'Escape' && pinned) unpin();
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
