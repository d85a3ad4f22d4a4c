// The x-ray: a program's jaxpr, StableHLO and (when it has one) compiled HLO side by side,
// linked equation by equation. Everything that depends on the listing's length is computed once per
// program; a hover only touches the lines of the groups it lights (hover.js, shared with the notebook).
import { html, plural, render } from './html.js';
import { getJSON, listing, onScreen, programURL, typing } from './data.js';
import {
  backendNote, compiledLayer, compiledStats, foldedNote, fusionList, hloListing, indexCompiled, instructionNote,
  whyCompiled,
} from './compiled.js';
import { LAYERS, Lights } from './hover.js';
import { scrollIntoBox, settleAtTop } from './scroll.js';
import { onTabKeys, selectTab } from './tabs.js';
import { costNote, costPanel, layerCost, markShares, sortCostTable } from './xray-cost.js';
import { indexPasses, passPanel, passesNote } from './xray-passes.js';
import { NAMES, indexProgram, litLines, nameLayers, stats, where, whyUnmapped } from './xray-index.js';
import { SOURCE_NAMES, dumpPanel, sourceListings, sourceProgram, sourceXray, whySourceDim } from './xray-dump.js';

const BANDS = 8;
const CHUNK = 64;
// Above this many lines in one column, the status line sums a group up (an expand lists it): a scan's
// fusion lights over a hundred lines, and sixteen chips would bury the line being read.
const BIG = 12;
// A touch screen has no hover and no Esc key: its status line speaks of taps.
const TOUCH = '(hover: none), (pointer: coarse)';

/** A new listing `<pre>` readied for a column: its lines grouped in blocks the browser can skip while off screen. */
function columnCopy(source) {
  if (!source) return document.createTextNode('');
  const copy = source;
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

/** The compiled listing for a target as an element, or the reason it could not be fetched. */
async function compiledSource(slug, hlo, target) {
  if (!hlo?.text) return { source: null, error: '' };
  try {
    const holder = document.createElement('div');
    render(holder, await hloListing(slug, target));
    return { source: holder.firstElementChild, error: '' };
  } catch (e) {
    return { source: null, error: e.message };
  }
}

/** A compiled listing that opens on a dump's source tables (`FileNames` ... `StackFrames`, dozens of lines
 * before any computation) is scrolled to its first computation; the tables stay above it. */
function skipTables(box, rows, hlo) {
  const first = Math.min(...hlo.instructions.map((i) => i.line));
  const header = rows[first - 2];  // the computation's signature, just above its first instruction
  if (!(first > 12 && header)) return;
  settleAtTop(box, header);
}

/** A dump's HLO before optimisations, shown in the second column, opens at its first computation too (the
 * line that starts one: `%name (` or `ENTRY %name (`), its source tables above it. */
function skipBeforeTables(box, rows) {
  const header = [...rows].find((r) => /^(ENTRY )?%[\w.-]+ \(/.test(r.textContent));
  if (!header || Number(header.dataset.line) <= 12) return;
  settleAtTop(box, header);
}

/** Class each line by what it lights: its first group's band, else XLA's own or dim; fusions bold. */
function markRows(rows, index, compiled) {
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
}

/** The x-ray section: the program on show, the loads under way, and what the status line says. */
class XraySection {
  constructor(root) {
    this.root = root;
    this.pick = root.querySelector('[data-xray-pick]');
    this.statsEl = root.querySelector('[data-xray-stats]');
    this.status = root.querySelector('[data-xray-status]');
    this.passEl = root.querySelector('[data-xray-pass]');
    this.passLine = null; // the compiled line whose passes the panel shows
    this.compiledEl = root.querySelector('[data-xray-compiled]');
    this.dumpEl = root.querySelector('[data-xray-dump]');
    // Each column's heading and tab label, as the page prints them: a source x-ray names them otherwise.
    this.headings = Object.fromEntries(['jaxpr', 'stablehlo'].map((l) => {
      const h = root.querySelector(`#xray-col-${l} h3`);
      const tab = root.querySelector(`[data-xray-tab="${l}"]`).firstChild;
      return [l, { h, tab, words: [h.textContent, tab.textContent] }];
    }));
    this.byEl = root.querySelector('[data-xray-backend]');
    this.targetsEl = root.querySelector('[data-xray-targets]');
    // The compile targets the corpus has, in the registry's order (the page's switch lists them so):
    // the column shows the first a program has, unless the learner picked another.
    this.targets = [...this.targetsEl.querySelectorAll('[data-xray-target]')].map((b) => b.dataset.xrayTarget);
    this.target = this.targets[0] ?? null;
    this.cols = Object.fromEntries(LAYERS.map((l) => [l, root.querySelector(`[data-xray-col="${l}"]`)]));
    this.hloCol = this.cols.hlo.closest('.col');
    this.tabs = [...root.querySelectorAll('[data-xray-tab]')];
    this.layer = 'jaxpr';   // the layer on show when the screen fits one (gym.css, under 700 px)
    this.litNow = null;     // layer -> lines lit, for the switcher's counts and scrolling
    this.summed = null;     // the groups the status line sums up, listed when expanded
    this.cursor = null;     // {layer, n, row}: the line the keyboard stands on
    this.touch = matchMedia(TOUCH).matches;
    if (this.touch) render(this.status, html`tap a line: its equation lights in every layer · tap it again to unpin`);
    this.idleNodes = [...this.status.childNodes].map((n) => n.cloneNode(true));
    this.shown = null;    // {slug, program, index, compiled, rows, target, cost}
    this.costSort = 'line'; // how the cost table is sorted: kept from program to program
    this.loading = null;  // the slug the section should end up showing
    this.inflight = null; // {slug, promise} of the load under way
    this.lights = new Lights(root, this.cols, {
      describe: (groups, layer, n) => this.describe(groups, layer, n),
      idle: () => this.idle(),
    });
  }

  idle() {
    this.status.replaceChildren(...this.idleNodes.map((n) => n.cloneNode(true)));
    this.count(null);
  }

  /** Put how many lines each layer lights on the switcher's tabs (none: clear them). */
  count(lines) {
    this.litNow = lines;
    for (const tab of this.tabs) {
      const n = lines?.[tab.dataset.xrayTab].length;
      tab.querySelector('[data-xray-count]').textContent = n ? ` · ${n}` : '';
    }
  }

  /** Show one layer (the others hide on a narrow screen) and scroll its first lit line into view. */
  showLayer(layer, focus = false) {
    this.layer = layer;
    selectTab(this.tabs, this.tabs.find((t) => t.dataset.xrayTab === layer), focus);
    for (const l of LAYERS) this.cols[l].closest('.col').toggleAttribute('data-on', l === layer);
    const n = this.litNow?.[layer][0];
    const row = n && this.shown?.rows[layer][n - 1];
    if (row) scrollIntoBox(this.cols[layer], row);
  }

  /** Show a program; asking again for the one being loaded waits for that load (the picker and the
   * section coming into view both ask), and asking for the one on show cancels any other load. */
  load(slug) {
    if (this.inflight?.slug === slug) return this.inflight.promise;
    this.loading = slug;
    if (this.shown?.slug === slug) {
      this.inflight = null;
      this.root.setAttribute('data-ready', '');
      return Promise.resolve();
    }
    const promise = this.show(slug).finally(() => { if (this.inflight?.promise === promise) this.inflight = null; });
    this.inflight = { slug, promise };
    return promise;
  }

  async show(slug) {
    this.root.removeAttribute('data-ready');
    let program;
    try {
      program = await getJSON(programURL(slug));
    } catch (e) {
      if (this.loading === slug) this.statsEl.textContent = `could not load ${slug}: ${e.message}`;
      return;
    }
    let sources;
    const bySource = sourceXray(program);
    try {
      sources = await (bySource ? sourceListings(slug)
        : Promise.all(['jaxpr', 'stablehlo'].map((layer) => listing(slug, layer))));
    } catch (e) {
      if (this.loading === slug) this.statsEl.textContent = `could not load ${slug}'s listings: ${e.message}`;
      return;
    }
    // The compiled column shows one target's layer: the rest of the section reads it as `hlo`.
    const target = compiledLayer(program, this.target) ? this.target : this.targets.find((t) => compiledLayer(program, t));
    const hlo = target ? compiledLayer(program, target) : null;
    // The layer's costs come with its listing, from their own file (one program's, one target's).
    const [{ source: hloSource, error }, cost] = await Promise.all([
      compiledSource(slug, hlo, target), hlo?.text ? layerCost(slug, target) : null]);
    if (this.loading !== slug) return;
    const record = program;
    program = { ...program, hlo };
    // A dump of XLA alone whose frames name source lines: its x-ray is those lines and XLA's two layers.
    if (bySource && hloSource) program = sourceProgram(program);
    this.nameColumns(bySource && hloSource);
    const [jaxpr, stablehlo] = sources;
    // A dump of XLA alone has no JAX layers, and one of JAX before its jaxpr dumps no jaxpr: the columns it
    // has are the x-ray (said in the stats line).
    this.root.toggleAttribute('data-no-jaxpr', Boolean(hloSource) && !record.jaxpr && !bySource);
    this.root.toggleAttribute('data-xla-only', Boolean(hloSource) && !record.jaxpr && !record.stablehlo && !bySource);
    this.root.toggleAttribute('data-by-source', Boolean(hloSource) && bySource);
    const rows = this.swapColumns({ jaxpr, stablehlo, hlo: hloSource });
    const index = indexProgram(program);
    const compiled = hloSource ? indexCompiled(program.hlo) : null;
    markRows(rows, index, compiled);
    if (compiled) markShares(rows.hlo, cost);
    this.root.toggleAttribute('data-costed', Boolean(compiled && cost?.chip));
    this.shown = { slug, program, index, compiled, rows, target, cost: compiled ? cost : null,
                   origins: compiled ? indexPasses(hlo) : new Map(), bySource: this.root.hasAttribute('data-by-source') };
    this.showPass(null);
    this.showTargets(target, record);
    this.lights.show(index, rows, compiled?.bodies);
    if (compiled) skipTables(this.cols.hlo, rows.hlo, program.hlo);
    if (this.shown.bySource) skipBeforeTables(this.cols.stablehlo, rows.stablehlo);
    const panel = dumpPanel(record);
    this.dumpEl.hidden = !panel;
    if (panel) render(this.dumpEl, panel);
    else this.dumpEl.replaceChildren();
    this.statsEl.textContent = this.shown.bySource
      ? `XLA's layers and the source lines their stack frames name (the dump holds no jaxpr or StableHLO of this module): ${record.dump.counts.join(' · ')}`
      : this.root.hasAttribute('data-xla-only')
      ? 'XLA\'s layers alone: the dump holds no jaxpr or StableHLO of this module (JAX_DUMP_IR_TO writes them)'
      : this.root.hasAttribute('data-no-jaxpr')
        ? 'StableHLO and XLA\'s layers: the dump holds no jaxpr of this module (a JAX that dumps jaxprs writes it with JAX_DUMP_IR_MODES=jaxpr,stablehlo)'
        : stats(program);
    this.showCompiled(error);
    if ((program.xray || []).length) this.idle();
    else render(this.status, html`This program has no x-ray groups yet: every line shows dimmed.`);
    this.root.dataset.program = slug;
    this.root.setAttribute('data-ready', '');
  }

  /** Name the first two columns as a source x-ray has them (source lines, HLO before optimisations), or as
   * the page prints them (jaxpr, StableHLO). */
  nameColumns(bySource) {
    nameLayers(bySource ? SOURCE_NAMES : null);
    const words = { jaxpr: ['source lines', 'source'], stablehlo: ['HLO before optimisations', 'HLO before'] };
    for (const [layer, { h, tab, words: own }] of Object.entries(this.headings)) {
      [h.textContent, tab.textContent] = bySource ? words[layer] : own;
    }
  }

  /** Put a program's listings (new `<pre>`s, by layer) in the columns (the compiled one hidden if it has none); its line elements. */
  swapColumns(listings) {
    const rows = {};
    const hloSource = listings.hlo;
    // Reset scrolling before any swap: a scrollTop write after one would force a layout of the new listing.
    for (const layer of LAYERS) this.cols[layer].scrollTop = 0;
    for (const layer of LAYERS) {
      const copy = columnCopy(listings[layer]);
      this.cols[layer].replaceChildren(copy);
      rows[layer] = this.cols[layer].querySelectorAll('[data-line]');
    }
    this.root.toggleAttribute('data-compiled', Boolean(hloSource));
    this.hloCol.hidden = !hloSource;
    this.tabs.find((t) => t.dataset.xrayTab === 'hlo').hidden = !hloSource;
    const missing = { jaxpr: this.root.hasAttribute('data-no-jaxpr'), stablehlo: this.root.hasAttribute('data-xla-only') };
    for (const layer of ['jaxpr', 'stablehlo']) {
      this.cols[layer].closest('.col').hidden = missing[layer];
      this.tabs.find((t) => t.dataset.xrayTab === layer).hidden = missing[layer];
    }
    if (missing[this.layer]) this.showLayer(missing.stablehlo ? 'hlo' : 'stablehlo');
    this.cursor = null;
    this.litNow = null;
    if (this.layer === 'hlo' && !hloSource) this.showLayer('jaxpr');
    return rows;
  }

  /** The switch between the compiled layers the program has (shown when it has two or more), on `target`. */
  showTargets(target, record) {
    this.targetsEl.hidden = this.targets.filter((t) => compiledLayer(record, t)).length < 2;
    for (const b of this.targetsEl.querySelectorAll('[data-xray-target]')) {
      b.hidden = !compiledLayer(record, b.dataset.xrayTarget);
      b.setAttribute('aria-pressed', String(b.dataset.xrayTarget === target));
    }
    this.root.dataset.target = target ?? '';
  }

  /** Show the other target's compiled layer of the program on show. */
  switchTarget(target) {
    if (!this.shown || this.shown.target === target) return Promise.resolve();
    this.target = target;
    const { slug } = this.shown;
    this.shown = null;
    this.inflight = null;
    return this.load(slug);
  }

  /** The backend, the counts and the fusion list under the columns; or why there is no compiled column. */
  showCompiled(error) {
    const { program: { hlo }, index, compiled, cost } = this.shown;
    if (!compiled) {
      this.byEl.textContent = '';
      render(this.compiledEl, error
        ? html`<p class="fine">Could not load the compiled HLO (${error}).</p>`
        : html`<p class="fine">No compiled layer for this program: added programs carry one when added with <code>--hlo</code>.</p>`);
      return;
    }
    this.byEl.textContent = `XLA · ${hlo.device_kind || hlo.backend}`;  // a TPU's or GPU's model, else cpu
    this.byEl.title = `${backendNote(hlo)}${hlo.host ? ` · host ${hlo.host}` : ''}`;
    // A program lowered for a TPU or a GPU alone (a Pallas kernel) has no CPU compile to switch to: say why.
    const platform = this.shown.program.platform;
    const only = platform === 'tpu'
      ? html` <span data-xray-platform-note>No CPU or GPU compile: this program lowers for TPU only (a Mosaic kernel has no other lowering).</span>`
      : platform === 'gpu'
        ? html` <span data-xray-platform-note>No CPU compile: this program lowers for a GPU only (its Pallas kernel has no CPU lowering).</span>` : '';
    render(this.compiledEl, html`<p class="note" data-xray-hlo-note>${backendNote(hlo)}.${only}
      <span class="stats" data-xray-hlo-stats>${compiledStats(hlo)}${passesNote(hlo)}</span>
      <span class="legend"><span class="key fz">bold number</span> a fusion (hover it: every equation it absorbed lights) · <span class="key x">dotted</span> XLA's own</span></p>
      ${costPanel(cost, this.costSort)}
      ${hlo.fusions.length ? fusionList(hlo, index.groupOf, index.eqns, (g) => g % BANDS,
    ...(this.shown.bySource ? ['source line', 'source'] : [])) : ''}`);
  }

  /** Under the status line, what the per-pass dumps say of compiled line `n` (null, or the line shown again:
   * fold it away). Only a dump read with its per-pass files has anything to say. */
  showPass(n) {
    const panel = n === null || n === this.passLine || !this.shown?.compiled
      ? null : passPanel(this.shown.program.hlo, this.shown.origins, n, this.shown.compiled.instructions.get(n));
    this.passLine = panel ? n : null;
    this.passEl.hidden = !panel;
    if (panel) render(this.passEl, panel);
    else this.passEl.replaceChildren();
  }

  /** A group as the status line names it: its equation, primitive (linked to its op card) and lines. */
  chip(i, short) {
    const { index, rows, compiled } = this.shown;
    const e = index.eqns.get(index.groups[i].eqn);
    const l = index.lines[i];
    const op = rows.jaxpr[e.jaxpr_lines[0] - 1]?.querySelector('a.o');
    const name = op ? html`<a href="${op.getAttribute('href')}">${e.primitive}</a>` : e.primitive;
    if (this.shown.bySource) return html`<span class="grp b${i % BANDS}">${where(l.jaxpr, 'jaxpr')} · ${where(l.stablehlo, 'stablehlo')} · ${where(l.hlo, 'hlo')}</span>`;
    if (short) return html`<span class="grp b${i % BANDS}">${name} · ${where(l.jaxpr, 'jaxpr')}</span>`;
    return html`<span class="grp b${i % BANDS}">equation ${e.id} · ${name} · ${where(l.jaxpr, 'jaxpr')} · ${where(l.stablehlo, 'stablehlo')} (${plural(l.stablehlo.length, 'line')})${
      compiled ? html` · ${where(l.hlo, 'hlo')}` : ''}</span>`;
  }

  /** The groups a line lights, as chips; or, when they light more than BIG lines in a column, their
   * counts and an expand that lists them. */
  chips(groups, lines) {
    if (!LAYERS.some((l) => lines[l].length > BIG)) {
      this.summed = null;
      return groups.map((i) => this.chip(i, groups.length > 3));
    }
    this.summed = groups;
    const { compiled } = this.shown;
    const fusions = compiled ? lines.hlo.filter((n) => compiled.fusions.has(n)).length : 0;
    const counts = LAYERS.filter((l) => lines[l].length).map((l) => `${lines[l].length} ${NAMES[l]}`).join(' · ');
    const more = this.lights.pinned
      ? html`<button type="button" class="expand" data-xray-expand aria-expanded="false">expand</button><span class="grps" data-xray-list hidden></span>`
      : html`<span class="fine">${this.touch ? 'tap' : 'click'} to pin, then expand</span>`;
    return html`<span data-xray-summary>lights ${plural(groups.length, 'equation')}: ${counts} lines${
      fusions ? ` in ${plural(fusions, 'fusion')}` : ''}</span> — ${more}`;
  }

  /** The expand of a summed-up group: list its chips (built on first use), or fold them away. */
  expand(button) {
    const list = button.nextElementSibling;
    if (!list.childElementCount) render(list, html`${this.summed.map((i) => this.chip(i, true))}`);
    const open = button.getAttribute('aria-expanded') !== 'true';
    list.hidden = !open;
    button.setAttribute('aria-expanded', String(open));
    button.textContent = open ? 'collapse' : 'expand';
  }

  /** Say on the status line what line `n` of `layer` lights (no layer: a group walked to by j/k). */
  describe(groups, layer, n) {
    const { index, program, rows, compiled } = this.shown;
    const row = layer && rows[layer][n - 1];
    const tag = layer ? html`<span class="tag">${NAMES[layer]} ${n}</span> ` : '';
    const pin = this.lights.pinned ? html` <span class="fine">pinned · ${this.touch ? 'tap again to unpin' : 'Esc unpins'}</span>` : '';
    const lines = litLines(index, groups);
    this.count(groups.length ? lines : null);
    this.summed = null;
    const fusion = layer === 'hlo' ? compiled.fusions.get(n) : null;
    const cost = layer === 'hlo' ? costNote(this.shown.cost, n) : '';
    if (fusion) {
      const body = compiled.bodies.get(n);
      const head = html`${tag}fusion <code>%${fusion.name}</code> <span class="tag">${fusion.kind}</span>${body ? html` runs %${body.name}` : ''}`;
      if (!fusion.eqns.length && !groups.length) {
        row.title = whyCompiled(compiled, n, row.textContent);
        render(this.status, html`${head}: <span class="own">XLA's own: no equation wrote this</span>${cost}${pin}`);
      } else {
        const absorbed = this.shown.bySource ? plural(groups.length, 'source line') : plural(fusion.eqns.length, 'equation');
        render(this.status, html`${head}, absorbing ${absorbed}: ${this.chips(groups, lines)}${cost}${pin}`);
      }
      return;
    }
    if (!groups.length) {
      const why = layer === 'hlo' ? whyCompiled(compiled, n, row.textContent)
        : this.shown.bySource ? whySourceDim(layer, row.textContent) : whyUnmapped(index, program, layer, n, row.textContent);
      row.title = why;
      render(this.status, html`${tag}<span data-xray-why>${why}</span>${cost}`);
      return;
    }
    // A compiled instruction known by dataflow or by its region, or one that absorbed equations XLA folded into
    // it, says so beside its equations; an equation folded away says which instruction absorbed it.
    const note = layer === 'hlo' ? instructionNote(compiled, n)
      : foldedNote(compiled, groups.map((i) => index.groups[i].eqn));
    render(this.status, html`${note ? html`${tag}<span class="fine">${note}</span> ` : ''}${this.chips(groups, lines)}${cost}${pin}`);
  }

  /** Stand the keyboard on line `n` of `layer`: it lights, and explains itself, like a hovered line. */
  moveCursor(layer, n) {
    const row = this.standOn(layer, n);
    if (!row) return;
    scrollIntoBox(this.cols[layer], row);
    this.lights.hover(layer, row);
  }

  /** Mark line `n` of `layer` as the keyboard's line (outlined; the arrows move on from it); its element. */
  standOn(layer, n) {
    const rows = this.shown.rows[layer];
    const row = rows[Math.max(1, Math.min(rows.length, n)) - 1];
    if (!row) return null;
    this.cursor?.row.classList.remove('cur');
    row.classList.add('cur');
    this.cursor = { layer, n: Number(row.dataset.line), row };
    return row;
  }

  /** A listing's keys: arrows (and Page Up/Down) move the keyboard's line, Enter or Space pins it. */
  wireCursor(layer) {
    const col = this.cols[layer];
    // The line at the top of the column (lines never wrap, so all are one line tall).
    const top = () => Math.floor(col.scrollTop / (this.shown.rows[layer][0]?.offsetHeight || 1)) + 1;
    const start = () => (this.cursor?.layer === layer ? this.cursor.n : top());
    col.addEventListener('focus', () => {
      if (this.shown && col.matches(':focus-visible')) this.moveCursor(layer, start());
    });
    col.addEventListener('blur', () => {
      if (this.cursor?.layer !== layer) return;
      this.cursor.row.classList.remove('cur');
      this.lights.leave();
    });
    col.addEventListener('keydown', (e) => {
      if (!this.shown || !this.shown.rows[layer].length) return;
      const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 16, PageUp: -16 }[e.key];
      if (step) {
        e.preventDefault();
        this.moveCursor(layer, this.cursor?.layer === layer ? this.cursor.n + step : top());
      } else if ((e.key === 'Enter' || e.key === ' ') && this.cursor?.layer === layer) {
        e.preventDefault();
        this.lights.click(layer, this.cursor.n);
        this.showPass(layer === 'hlo' ? this.cursor.n : null);
      }
    });
  }

  /** The layer switcher of narrow screens: a tab per layer, arrows, Home and End move along them. */
  wireTabs() {
    const list = this.root.querySelector('[data-xray-tabs]');
    list.addEventListener('click', (e) => {
      const tab = e.target.closest('[data-xray-tab]');
      if (tab) this.showLayer(tab.dataset.xrayTab);
    });
    onTabKeys(list, (e) => {
      const tabs = this.tabs.filter((t) => !t.hidden);
      const i = tabs.indexOf(e.target.closest('[data-xray-tab]'));
      return i < 0 ? null : { tabs, i };
    }, (tab) => this.showLayer(tab.dataset.xrayTab, true));
    this.status.addEventListener('click', (e) => {
      const button = e.target.closest('[data-xray-expand]');
      if (button && this.summed) this.expand(button);
    });
  }

  /** Hover and click in the columns; hover, focus and click in the fusion list (each acts like its
   * fusion's line, the compiled column scrolling to the fusion's body); j, k and Esc. */
  wireLights() {
    const lights = this.lights;
    this.wireTabs();
    for (const layer of LAYERS) {
      lights.watch(this.cols[layer], layer);
      this.wireCursor(layer);
      this.cols[layer].addEventListener('click', (e) => {
        const row = e.target.closest('[data-line]');
        if (!row || !this.shown) return;
        if (e.target.closest('a') && (e.ctrlKey || e.metaKey)) return;
        e.preventDefault();
        lights.click(layer, Number(row.dataset.line));
        this.showPass(layer === 'hlo' ? Number(row.dataset.line) : null);
      });
    }
    // A fusion in the fusion list, or an instruction in the cost table: the compiled line it stands for, and
    // where the compiled column scrolls to show it (a fusion's body, where its absorbed instructions and XLA's
    // own sit together; a costed line itself).
    const listed = (e) => {
      const item = e.target.closest('[data-fusion-line], [data-cost-line]');
      const n = Number(item?.dataset.fusionLine ?? item?.dataset.costLine);
      if (!this.shown?.compiled || !this.shown.rows.hlo[n - 1]) return null;
      return { n, focus: { hlo: 'fusionLine' in item.dataset ? this.shown.compiled.bodies.get(n)?.lines[0] ?? n : n },
               costed: 'costLine' in item.dataset };
    };
    const showListed = (e) => {
      const at = listed(e);
      if (at) lights.hover('hlo', this.shown.rows.hlo[at.n - 1], null, at.focus);
    };
    this.compiledEl.addEventListener('mouseover', showListed);
    this.compiledEl.addEventListener('focusin', showListed);
    this.compiledEl.addEventListener('mouseleave', () => lights.leave());
    this.compiledEl.addEventListener('click', (e) => {
      const sort = e.target.closest('[data-cost-sort]')?.dataset.costSort;
      if (sort) {  // kept for the next program shown
        if (this.shown?.cost && sortCostTable(this.compiledEl, this.shown.cost, sort)) this.costSort = sort;
        return;
      }
      const at = listed(e);
      if (!at) return;
      if (at.costed) {  // outlined, so the eye finds it in the listing (shown, on a screen of one layer)
        if (this.layer !== 'hlo') this.showLayer('hlo');
        this.standOn('hlo', at.n);
      }
      lights.click('hlo', at.n, null, at.focus);
      this.showPass(at.n);
    });
    this.targetsEl.addEventListener('click', (e) => {
      const target = e.target.closest('[data-xray-target]')?.dataset.xrayTarget;
      if (target) this.switchTarget(target);
    });
    document.addEventListener('keydown', (e) => {
      if (typing(e) || !this.shown || !onScreen(this.root)) return;
      if (e.key === 'j') { e.preventDefault(); lights.walk(1); }
      else if (e.key === 'k') { e.preventDefault(); lights.walk(-1); }
      else if (e.key === 'Escape' && (lights.pinned || this.passLine !== null)) {
        if (lights.pinned) lights.unpin();
        this.showPass(null);
      }
    });
  }

  /** The picker, "open in the x-ray" links, and the first load when the section nears the viewport. */
  wirePicker() {
    const pick = this.pick;
    pick.addEventListener('change', () => this.load(pick.value));
    document.addEventListener('click', (e) => {
      const open = e.target.closest('[data-xray-open]');
      if (!open) return;
      pick.value = open.dataset.xrayOpen;
      this.load(pick.value);
    });
    const seen = new IntersectionObserver((entries) => {
      if (entries.some((en) => en.isIntersecting)) { seen.disconnect(); this.load(pick.value); }
    }, { rootMargin: '600px 0px' });
    seen.observe(this.root);
  }
}

/** Wire the x-ray section. */
export function registerXray(root) {
  const section = new XraySection(root);
  section.wireLights();
  section.wirePicker();
  return { load: (slug) => section.load(slug) };
}
