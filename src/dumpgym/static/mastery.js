// The mastery map: per drill kind, per skill and per primitive, the attempts, accuracy and FSRS
// stability the progress record holds, drawn as one small SVG per kind; and "practise my weakest",
// which points a drill at the weakest cell through the drills' focus hook.
import { html, render, plural } from './html.js';
import { drillURL, getJSON } from './data.js';
import { skillOf } from './schedule.js';

/** A cell needs this many attempts before "practise my weakest" may pick it. */
export const MIN_ATTEMPTS = 3;

const SECTIONS = [['skill', 'skills'], ['primitive', 'primitives']];
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const count = (v) => (Number.isSafeInteger(v) && v >= 0 ? v : 0);

/** Accuracy band 0 (under 50%) to 4 (95% and over): the cell's fill class. */
export function band(accuracy) {
  return accuracy >= 0.95 ? 4 : accuracy >= 0.85 ? 3 : accuracy >= 0.7 ? 2 : accuracy >= 0.5 ? 1 : 0;
}

/** A tally key ("skill:reduction", "primitive:dot_general") as the focus filter it stands for. */
export function filterOf(key) {
  const i = key.indexOf(':');
  return i > 0 && SECTIONS.some(([s]) => s === key.slice(0, i)) ? { [key.slice(0, i)]: key.slice(i + 1) } : null;
}

/**
 * The record's tallies as rows, one per drill kind in `order` (then any other kind, by name):
 * {kind, all, cells}, each cell {kind, key, section, name, attempts, correct, accuracy, stability}.
 * `stability(kind, key)` gives the mean FSRS stability of the cell's cards, or null when unknown.
 */
export function masteryRows(tallies, order, stability = () => null) {
  const kinds = Object.keys(isObject(tallies) ? tallies : {}).filter((k) => isObject(tallies[k]));
  kinds.sort((a, b) => {
    const [i, j] = [order.indexOf(a), order.indexOf(b)];
    return (i < 0) - (j < 0) || i - j || a.localeCompare(b);
  });
  const cell = (kind, key, t) => {
    const attempts = count(t?.attempts);
    const correct = Math.min(count(t?.correct), attempts);
    const section = key === 'all' ? 'all' : key.slice(0, key.indexOf(':'));
    return { kind, key, section, name: key === 'all' ? 'all' : key.slice(section.length + 1), attempts, correct,
      accuracy: attempts ? correct / attempts : null, stability: stability(kind, key) };
  };
  return kinds.map((kind) => {
    const t = tallies[kind];
    const cells = Object.keys(t).filter((key) => filterOf(key) && isObject(t[key]))
      .map((key) => cell(kind, key, t[key]))
      .filter((c) => c.attempts > 0)
      .sort((a, b) => SECTIONS.findIndex(([s]) => s === a.section) - SECTIONS.findIndex(([s]) => s === b.section) ||
        a.name.localeCompare(b.name));
    return { kind, all: cell(kind, 'all', t.all), cells };
  }).filter((row) => row.all.attempts > 0 || row.cells.length);
}

/** The weakest cell with at least MIN_ATTEMPTS: lowest accuracy, then lower stability (unknown last), then more attempts. */
export function weakest(rows) {
  const candidates = rows.flatMap((r) => r.cells).filter((c) => c.attempts >= MIN_ATTEMPTS);
  const s = (c) => (c.stability ?? Infinity);
  candidates.sort((a, b) => a.accuracy - b.accuracy || s(a) - s(b) || b.attempts - a.attempts ||
    a.kind.localeCompare(b.kind) || a.key.localeCompare(b.key));
  return candidates[0] ?? null;
}

const percent = (a) => `${Math.round(a * 100)}%`;
const days = (s) => (s === null ? '' : `S ${s < 10 ? s.toFixed(1) : Math.round(s)} d`);

/** What a cell says in words: its accessible name and tooltip. */
function describe(c, title) {
  const what = c.section === 'all' ? `${title}, every item` : `${title}, ${c.section} ${c.name}`;
  const acc = c.attempts ? `${c.correct} of ${c.attempts} right (${percent(c.accuracy)})` : 'no attempts';
  return `${what}: ${acc}${c.stability === null ? '' : `, mean stability ${c.stability.toFixed(1)} days`}`;
}

// One SVG per kind, in viewBox units: three cells a row, so it reads at 375 px and scales up to its max width.
const W = 330, COLS = 3, GAP = 6, CW = (W - GAP * (COLS - 1)) / COLS, CH = 58, HEAD = 20;

function cellMarkup(c, title, x, y) {
  const label = c.name.length > 15 ? `${c.name.slice(0, 14)}…` : c.name;
  const words = describe(c, title);
  return html`<g class="cell" data-cell="${c.kind}/${c.key}" data-attempts="${c.attempts}" data-correct="${c.correct}"
      tabindex="0" role="button" aria-label="${words}. Practise it." transform="translate(${x} ${y})">
    <title>${words}</title>
    <rect width="${CW}" height="${CH}" rx="5" class="a${c.accuracy === null ? 'n' : band(c.accuracy)}"></rect>
    <text x="7" y="16" class="name">${label}</text>
    <text x="7" y="34" class="num" data-count>${c.correct}/${c.attempts}</text>
    <text x="${CW - 7}" y="34" class="num" text-anchor="end" data-accuracy>${c.accuracy === null ? '–' : percent(c.accuracy)}</text>
    <text x="7" y="50" class="stab" data-stability>${days(c.stability)}</text>
  </g>`;
}

function rowMarkup(row, title) {
  const parts = [];
  let y = 0;
  const place = (cells) => {
    cells.forEach((c, i) => parts.push(cellMarkup(c, title, (i % COLS) * (CW + GAP), y + Math.floor(i / COLS) * (CH + GAP))));
    y += Math.ceil(cells.length / COLS) * (CH + GAP);
  };
  place([row.all]);
  for (const [section, heading] of SECTIONS) {
    const cells = row.cells.filter((c) => c.section === section);
    if (!cells.length) continue;
    parts.push(html`<text x="0" y="${y + 14}" class="head">${heading}</text>`);
    y += HEAD;
    place(cells);
  }
  return html`<figure class="mastery-row" data-mastery-kind="${row.kind}">
    <figcaption>${title} <span class="fine">${plural(row.all.attempts, 'answer')}</span></figcaption>
    <svg viewBox="0 0 ${W} ${y - GAP}" role="group" aria-label="${title}: mastery by skill and primitive">${parts}</svg>
  </figure>`;
}

/**
 * Mean FSRS stability per cell, from the record's cards. A card's family is `${drill}/${program}/…`;
 * the "all" cell takes every card of its kind. A skill or primitive cell needs to know which items a
 * family holds: `item.card` over the splits of the programs the cards name, fetched once per split.
 */
class Stability {
  constructor(onLoad) {
    this.onLoad = onLoad;
    this.families = new Map(); // `${kind}/${slug}` -> Map(family -> Set(tally keys)), once loaded
    this.loading = new Set();
  }

  means(cards) {
    const byCell = new Map();
    const add = (cellId, s) => { const a = byCell.get(cellId) ?? []; a.push(s); byCell.set(cellId, a); };
    for (const [family, card] of Object.entries(isObject(cards) ? cards : {})) {
      const s = Number(card?.stability);
      const [kind, slug] = family.split('/');
      if (!kind || !slug || !Number.isFinite(s) || !(card?.reps > 0 || card?.last_review)) continue;
      add(`${kind}/all`, s);
      const keys = this.keysFor(kind, slug)?.get(family);
      keys?.forEach((key) => add(`${kind}/${key}`, s));
    }
    return (kind, key) => {
      const list = byCell.get(`${kind}/${key}`);
      return list ? list.reduce((a, b) => a + b, 0) / list.length : null;
    };
  }

  keysFor(kind, slug) {
    const id = `${kind}/${slug}`;
    if (this.families.has(id)) return this.families.get(id);
    if (this.loading.has(id) || !/^[a-z0-9-]+$/.test(kind + slug)) return null;
    this.loading.add(id);
    getJSON(drillURL(kind, slug)).then((split) => {
      const map = new Map();
      for (const item of split.items) {
        const family = item.card;
        const keys = map.get(family) ?? new Set();
        if (item.primitive) keys.add(`primitive:${item.primitive}`);
        const skill = skillOf(item);
        if (skill) keys.add(`skill:${skill}`);
        map.set(family, keys);
      }
      this.families.set(id, map);
      this.onLoad();
    }, () => this.families.set(id, new Map()));
    return null;
  }
}

/** Wire the mastery section: the map, "practise my weakest", and the note saying what is being practised. */
export function registerMastery(root, progress, drills) {
  const map = root.querySelector('[data-mastery-map]');
  const button = root.querySelector('[data-mastery-weakest]');
  const status = root.querySelector('[data-mastery-status]');
  const tabs = [...document.querySelectorAll('[data-drill-tab]')];
  const order = tabs.map((t) => t.dataset.drillTab);
  const titleOf = (kind) => tabs.find((t) => t.dataset.drillTab === kind)?.textContent.replace(/\s+/g, ' ').trim() || kind;
  const stability = new Stability(() => draw());
  let rows = [];
  let focused = null; // the cell being practised

  function note() {
    const notes = [status, ...document.querySelectorAll('[data-focus-note]')];
    for (const el of notes.slice(1)) el.remove();
    if (!focused) {
      render(status, html``);
      return;
    }
    const words = html`Practising <b>${titleOf(focused.kind)}</b>, ${focused.section} <code>${focused.name}</code>: only those questions come up.`;
    render(status, html`<span>${words}</span> <button type="button" data-focus-stop>stop</button>`);
    const panel = document.querySelector(`section[data-drill="${CSS.escape(focused.kind)}"]`);
    const head = panel?.querySelector('.drill-head');
    if (head) {
      const p = document.createElement('p');
      p.className = 'focus-note';
      p.dataset.focusNote = '';
      render(p, html`<span>${words}</span> <button type="button" data-focus-stop>stop: every question again</button>`);
      head.after(p);
    }
  }

  function practise(c) {
    if (c.section === 'all') {
      stop();
      drills.select(c.kind);
    } else {
      focused = c;
      drills.focus(c.kind, filterOf(c.key));
      note();
    }
    document.getElementById(`drill-${c.kind}`)?.scrollIntoView({ block: 'start' });
  }

  function stop() {
    if (!focused) return;
    drills.focus(focused.kind, null);
    focused = null;
    note();
  }

  function draw() {
    const data = progress.data ?? {};
    rows = masteryRows(data.tallies ?? {}, order, stability.means(data.cards ?? {}));
    if (!rows.length) {
      render(map, html`<p class="empty" data-mastery-empty>No answers recorded yet: answer a few drill questions and the map fills in.</p>`);
    } else {
      render(map, html`${rows.map((row) => rowMarkup(row, titleOf(row.kind)))}`);
    }
    const weak = weakest(rows);
    button.disabled = !weak;
    button.title = weak ? `${titleOf(weak.kind)}: ${weak.section} ${weak.name}` : `needs a skill or primitive with ${MIN_ATTEMPTS} answers or more`;
  }

  wireCells(map, button, () => rows, practise);
  document.addEventListener('click', (e) => { if (e.target.closest('[data-focus-stop]')) stop(); });
  progress.addEventListener('change', draw);
  draw();
}


/** Clicks and Enter/Space on the map's cells practise that cell; the button practises the weakest. */
function wireCells(map, button, currentRows, practise) {
  map.addEventListener('click', (e) => {
    const g = e.target.closest('[data-cell]');
    const c = g && currentRows().flatMap((r) => [r.all, ...r.cells]).find((x) => `${x.kind}/${x.key}` === g.dataset.cell);
    if (c) practise(c);
  });
  map.addEventListener('keydown', (e) => {
    if ((e.key === 'Enter' || e.key === ' ') && e.target.closest?.('[data-cell]')) {
      e.preventDefault();
      e.stopPropagation();
      e.target.closest('[data-cell]').dispatchEvent(new MouseEvent('click', { bubbles: true }));
    }
  });
  button.addEventListener('click', () => {
    const weak = weakest(currentRows());
    if (weak) practise(weak);
  });
}
