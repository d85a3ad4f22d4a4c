// The line view of the drills: the first context block is a listing, one row per line, tapped or keyed.
// A `line` answer is one row (a tap, or Enter on the cursor); a set of `lines` is toggled row by row
// (tap, or Space on the cursor) and checked (the button, or Enter). Digits type the key number shown
// beside an operation's line; j/k step through those, ↑/↓ through every line. drill.js's panel holds
// the state (rows, cursor, picked) and calls these with itself.
import { html, render, ticks } from './html.js';
import { check } from './answer.js';
import { verdictMessage } from './answer-view.js';
import { lineElements } from './data.js';
import { scrollIntoBox } from './scroll.js';

// How the page names a listing's layer: the drills' captions (drill.js) and the line view's listing.
export const LAYERS = { jaxpr: 'jaxpr', stablehlo: 'StableHLO', 'hlo-before': 'HLO before optimisations', cpu: 'compiled HLO, CPU', tpu: 'compiled HLO, TPU', gpu: 'compiled HLO, GPU' };

/**
 * The rows (from 0) of a listing that hold an operation, the line view's keyed shortlist: a jaxpr line
 * with ` = `, a StableHLO line with ` = ` or `stablehlo.`; never a `module` or `func.func` line.
 */
export function candidateLines(lines, layer) {
  const op = layer === 'stablehlo'
    ? (line) => line.includes(' = ') || line.includes('stablehlo.')
    : (line) => line.includes(' = ');
  const structural = (line) => /^\s*(module|func\.func)\b/.test(line);
  return lines.flatMap((line, i) => (op(line) && !structural(line) ? [i] : []));
}

/**
 * The number the listing gives row `row` (from 1) of the line view: the first block may be lines 223–232 of
 * a compiled listing, and the rows show 223–232, the numbers the item's words and the x-ray use. Answers
 * and their keys count rows from 1 (answer.js grades rows); only what is shown is numbered as the listing.
 */
export function listingNumber(item, row) {
  const first = item.context?.[0]?.lines?.[0];
  return Number.isInteger(first) ? first + row - 1 : row;
}

/** Ask a `line` or `lines` question: the first context block as rows to tap, the rest shown above it. */
export function renderLines(panel, slug, blocks) {
  const item = panel.item;
  const multi = item.answer.form === 'lines';
  // The help says tap on a touch screen and keys on a keyboard (gym.css shows one: `.on-touch`, `.on-keys`).
  const help = multi
    ? html`<span class="on-touch">tap every line of the set (tap again to drop one), then check</span><span class="on-keys">click every line of the set; or type the key number beside an operation's line, or step with <kbd>j</kbd>/<kbd>k</kbd> (every line with ↑/↓); <kbd>Space</kbd> adds or drops the line, Enter checks</span>`
    : html`<span class="on-touch">tap the line</span><span class="on-keys">click a line; or type the key number beside an operation's line, or step through them with <kbd>j</kbd>/<kbd>k</kbd> (every line with ↑/↓), then press Enter</span>`;
  render(panel.body, html`
    <div class="ctx">${panel.header(slug, item.step ? html` · <span class="tag">${item.step}</span>` : '', { lines: false })}${
      panel.shownBlocks(blocks.slice(1))}</div>
    <p class="q" tabindex="-1" id="q-${panel.kind}">${item.question}</p>
    <div class="pick" data-pick tabindex="0" role="group" aria-labelledby="q-${panel.kind}" aria-describedby="pick-help-${panel.kind}"${multi ? html` data-multi` : ''}></div>
    <p class="fine" id="pick-help-${panel.kind}">${help}</p>
    ${multi ? html`<p class="check-row"><button type="button" class="check" data-submit>check (<span data-picked-count>0</span> tapped) <kbd aria-hidden="true">↵</kbd></button></p>` : ''}
    <div class="feedback" data-feedback aria-live="polite"></div>
    <p class="next-row"><button type="button" class="next" data-next hidden>next question <kbd aria-hidden="true">↵</kbd></button></p>`);
  const pick = panel.body.querySelector('[data-pick]');
  // The first block is the whole listing the question is about: its lines are the rows to tap.
  const lines = String(blocks[0] ?? '').replace(/\n$/, '').split('\n');
  render(pick, html`<pre class="ls" data-layer="${item.layer === 'stablehlo' ? 'stablehlo' : item.layer in LAYERS ? item.layer : 'jaxpr'}"><code>${
    lines.map((line, i) => html`<span data-line="${i + 1}" data-n="${listingNumber(item, i + 1)}">${line}\n</span>`)}</code></pre>`);
  panel.rows = lineElements(pick.querySelector('pre'));
  panel.cursor = 0;
  panel.placed = false;  // whether a key has put the cursor anywhere yet
  panel.typed = '';      // the key number typed so far
  // A numbered shortlist: the lines that hold an operation, so any answer is a key number and Enter away.
  panel.keyed = candidateLines(lines, item.layer);
  panel.keyed.forEach((row, n) => { panel.rows[row].dataset.key = n + 1; });
  panel.picked = new Set();  // a line set's tapped rows, from 1
  pick.addEventListener('click', (e) => {
    e.preventDefault();
    const row = e.target.closest('[data-line]');
    if (!row || panel.answered) return;
    if (multi) toggleLine(panel, Number(row.dataset.line));
    else answerLine(panel, Number(row.dataset.line));
  });
  panel.body.querySelector('[data-submit]')?.addEventListener('click', () => submitLines(panel));
  pick.addEventListener('focus', () => { if (!panel.answered) panel.rows[panel.cursor]?.classList.add('cur'); });
  pick.addEventListener('keydown', (e) => {
    if (panel.answered || !panel.rows.length) return;
    const step = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 }[e.key];
    if (step) {
      e.preventDefault();
      moveTo(panel, panel.cursor + step);
    } else if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      e.stopPropagation();
      if (!multi) answerLine(panel, panel.cursor + 1);
      else if (e.key === ' ') toggleLine(panel, panel.cursor + 1);
      else submitLines(panel);
    }
  });
  panel.body.querySelector('[data-next]').addEventListener('click', () => panel.next());
}

/** Put the line cursor on row `index` (from 0), in view, with the listing focused so Enter picks it. */
export function moveTo(panel, index) {
  const pick = panel.body.querySelector('[data-pick]');
  panel.rows[panel.cursor]?.classList.remove('cur');
  panel.cursor = Math.max(0, Math.min(panel.rows.length - 1, index));
  panel.placed = true;
  const row = panel.rows[panel.cursor];
  row.classList.add('cur');
  if (document.activeElement !== pick) pick.focus({ preventScroll: true });
  scrollIntoBox(pick, row);
  row.scrollIntoView({ block: 'nearest' });
}

/**
 * A key of the line view: digits type a key number (`1`, then `2` makes 12 while there are 12 or more),
 * `j`/`k` step to the next or previous keyed line. Returns whether the key was used.
 */
export function lineKey(panel, key) {
  if (panel.answered || !panel.rows?.length || !panel.keyed.length) return false;
  const n = panel.keyed.length;
  if (/^[0-9]$/.test(key)) {
    let typed = panel.typed + key;
    if (typed.startsWith('0') || Number(typed) > n) typed = key;  // too big to extend: start again
    panel.typed = Number(typed) >= 1 && Number(typed) <= n ? typed : '';
    if (panel.typed) moveTo(panel, panel.keyed[Number(panel.typed) - 1]);
    return true;
  }
  if (key !== 'j' && key !== 'k') return false;
  panel.typed = '';
  const at = panel.keyed.findIndex((row) => row >= panel.cursor);
  let next;
  if (!panel.placed) next = key === 'j' ? 0 : n - 1;
  else if (key === 'j') next = at < 0 ? n - 1 : panel.keyed[at] === panel.cursor ? Math.min(n - 1, at + 1) : at;
  else next = at < 0 ? n - 1 : Math.max(0, at - 1);
  moveTo(panel, panel.keyed[next]);
  return true;
}

/** Add a row (from 1) of the listing to a line set, or drop it. */
export function toggleLine(panel, line) {
  if (panel.answered || !panel.rows[line - 1]) return;
  panel.typed = '';  // the next digit starts a new key number
  if (panel.picked.has(line)) panel.picked.delete(line);
  else panel.picked.add(line);
  const row = panel.rows[line - 1];
  row.classList.toggle('sel', panel.picked.has(line));
  const count = panel.body.querySelector('[data-picked-count]');
  if (count) count.textContent = panel.picked.size;
}

/** Check a line set: an empty one is not graded (the feedback says how to answer). */
export function submitLines(panel) {
  if (panel.answered) return;
  const item = panel.item;
  const verdict = check(item.answer, [...panel.picked]);
  if (!verdict.readable) {
    render(panel.body.querySelector('[data-feedback]'), html`<p class="fine" data-hint>${verdict.reason}.</p>`);
    return;
  }
  const want = new Set(item.answer.lines);
  [...panel.rows].forEach((row, i) => {
    const n = i + 1;
    row.classList.toggle('right', panel.picked.has(n) && want.has(n));
    row.classList.toggle('wrong', panel.picked.has(n) && !want.has(n));
    row.classList.toggle('ans', !panel.picked.has(n) && want.has(n));
  });
  const first = panel.rows[(verdict.missing[0] ?? verdict.extra[0] ?? item.answer.lines[0]) - 1];
  if (first) scrollIntoBox(panel.body.querySelector('[data-pick]'), first);
  panel.body.querySelector('[data-submit]').disabled = true;
  // Told in the listing's numbers, as the rows show them.
  const shown = (ns) => ns.map((n) => listingNumber(item, n));
  panel.finish(verdict.right, verdictMessage({ ...item, answer: { ...item.answer, lines: shown(item.answer.lines) } },
    { ...verdict, missing: shown(verdict.missing), extra: shown(verdict.extra) }, { noun: 'line' }));
}

/** Grade a tapped row (from 1) of a `line` answer. */
export function answerLine(panel, line) {
  if (panel.answered) return;
  const item = panel.item;
  const { line: framework, accepted, explain: explained } = item.answer;
  const right = accepted.includes(line);
  const chosen = panel.rows[line - 1];
  const answer = panel.rows[(right ? line : framework) - 1];
  chosen?.classList.add(right ? 'right' : 'wrong');
  answer?.classList.add('ans');
  const pick = panel.body.querySelector('[data-pick]');
  if (answer) scrollIntoBox(pick, answer);
  const text = answer ? answer.textContent.trim() : '';
  const why = item.feedback ? html`<p data-why>${ticks(item.feedback)}</p>`
    : html`<p>Line ${listingNumber(item, framework)}: <code>${text}</code></p>`;
  const explain = explained?.[String(line)];
  panel.finish(right, right
    ? html`<p><b class="ok">right.</b></p>${why}`
    : html`<p><b class="no">not that line.</b> You picked line ${listingNumber(item, line)}; the framework's line is ${
      listingNumber(item, framework)}.</p>${
      explain ? html`<p data-explain>${ticks(explain)}</p>` : why}`);
}
