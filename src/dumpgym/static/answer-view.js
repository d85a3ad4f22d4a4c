// The views of the answers a learner builds (drill.js asks; answer.js grades): a typed value in a text
// field, axes toggled as chips on an operand's shape, and the words of a verdict: what was missing or
// extra, the misreading's reason, and one line of why the answer is right (`item.feedback`).
import { html, render, ticks } from './html.js';
import { SPELLINGS, answerText, check, exampleFor } from './answer.js';

// What each spelling asks for, in the field's label.
const WHAT = { aval: 'dtype and shape', shape: 'shape', dtype: 'dtype', int: 'a whole number', tile: 'a tile' };

/** A list of numbers as words: `5`, `5 and 9`, `3, 5 and 9`. */
const listed = (ns) => (ns.length < 2 ? String(ns[0]) : `${ns.slice(0, -1).join(', ')} and ${ns[ns.length - 1]}`);

const PLURAL = { line: 'lines', axis: 'axes' };

/** What a built answer lacked and had too much of, naming its parts by `noun` (`line 5`, `axes 0 and 2`). */
export function setNote(verdict, noun) {
  const name = (ns) => `${ns.length === 1 ? noun : PLURAL[noun] ?? `${noun}s`} ${listed(ns)}`;
  if (!verdict.missing.length && !verdict.extra.length) return '';
  return html`<p data-set-note>${verdict.missing.length ? html`Left out: <b data-missing>${name(verdict.missing)}</b>.` : ''}${
    verdict.missing.length && verdict.extra.length ? ' ' : ''}${
    verdict.extra.length ? html`Not in the answer: <b data-extra>${name(verdict.extra)}</b>.` : ''}</p>`;
}

/** The feedback for a graded answer: the verdict's words, then the item's one line of why. */
export function verdictMessage(item, verdict, { yours = '', noun = '' } = {}) {
  const answer = answerText(item.answer);
  const why = item.feedback ? html`<p data-why>${ticks(item.feedback)}</p>` : '';
  if (verdict.right) return html`<p><b class="ok">right:</b> <code>${answer}</code></p>${why}`;
  const reason = verdict.reason ? html`<p data-explain>${ticks(verdict.reason)}${/[.!?]$/.test(verdict.reason) ? '' : '.'}</p>` : '';
  return html`<p><b class="no">not quite.</b> The answer is <code>${answer}</code>.${
    yours ? html` You wrote <code>${yours}</code>.` : ''}</p>${noun ? setNote(verdict, noun) : ''}${reason}${why}`;
}

/** The typed view: a text field (placeholder: an example of the spelling that is not the answer), Enter checks. */
export function renderTyped(panel, { ctx, question }) {
  const { answer } = panel.item;
  const example = exampleFor(answer);
  const id = `typed-${panel.kind}`;
  render(panel.body, html`
    ${ctx}
    ${question}
    <form class="typed" data-typed novalidate>
      <label class="fine" for="${id}">type ${WHAT[answer.spelling] ?? 'the answer'}, like <code>${example}</code></label>
      <span class="typed-row"><input id="${id}" data-typed-input type="text" autocomplete="off" autocapitalize="off"
        spellcheck="false" enterkeyhint="go" inputmode="${answer.spelling === 'int' ? 'numeric' : 'text'}" placeholder="${example}">
      <button type="submit" class="check" data-submit>check <kbd aria-hidden="true">↵</kbd></button></span>
      <p class="fine hint" data-hint aria-live="polite"></p>
    </form>
    <div class="feedback" data-feedback aria-live="polite"></div>
    <p class="next-row"><button type="button" class="next" data-next hidden>next question <kbd aria-hidden="true">↵</kbd></button></p>`);
  const form = panel.body.querySelector('[data-typed]');
  const input = form.querySelector('input');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (panel.answered) return;
    const verdict = check(answer, input.value);
    if (!verdict.readable) {
      // Not graded: say how to write one (with an example that is not the answer).
      render(form.querySelector('[data-hint]'), html`That does not read as ${WHAT[answer.spelling] ?? 'an answer'}: write it like <code>${example}</code>.`);
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    input.readOnly = true;
    input.removeAttribute('aria-invalid');
    render(form.querySelector('[data-hint]'), html``);
    form.querySelector('[data-submit]').disabled = true;
    input.classList.add(verdict.right ? 'right' : 'wrong');
    const got = SPELLINGS[answer.spelling].read(input.value);
    panel.finish(verdict.right, verdictMessage(panel.item, verdict, { yours: verdict.right ? '' : got }));
  });
}

/** The axes view: one toggle chip per dimension of `dims` under `label`, digit keys toggle, Enter checks. */
export function renderAxes(panel, { ctx, question }) {
  const { answer } = panel.item;
  render(panel.body, html`
    ${ctx}
    ${question}
    <div class="axes" data-axes role="group" aria-labelledby="q-${panel.kind}">
      <code class="axes-label">${answer.label}</code>
      ${answer.dims.map((d, i) => html`<button type="button" class="axis" data-axis="${i}" aria-pressed="false" aria-label="axis ${i}, size ${d}"><kbd aria-hidden="true">${i}</kbd><code>${d}</code></button>`)}
      <button type="button" class="check" data-submit>check <kbd aria-hidden="true">↵</kbd></button>
    </div>
    <p class="fine"><span class="on-touch">tap the axes (none, one or several), then check</span><span class="on-keys">tap the axes, or type each axis number (<kbd>0</kbd>–<kbd>${answer.dims.length - 1}</kbd>) to toggle it; Enter checks (none tapped: no axis)</span></p>
    <div class="feedback" data-feedback aria-live="polite"></div>
    <p class="next-row"><button type="button" class="next" data-next hidden>next question <kbd aria-hidden="true">↵</kbd></button></p>`);
  const chips = [...panel.body.querySelectorAll('[data-axis]')];
  chips.forEach((chip) => chip.addEventListener('click', () => panel.toggleAxis(Number(chip.dataset.axis))));
  panel.body.querySelector('[data-submit]').addEventListener('click', () => panel.submitAxes());
  panel.body.querySelector('[data-axes]').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !panel.answered) {
      e.preventDefault();  // Enter checks; Space (the button's own key) toggles the chip in focus
      e.stopPropagation();
      panel.submitAxes();
    }
  });
}

/** Grade the toggled chips and mark each: right, wrong (tapped, not in the set), missed. */
export function gradeAxes(panel) {
  const { answer } = panel.item;
  const chips = [...panel.body.querySelectorAll('[data-axis]')];
  const picked = chips.filter((c) => c.getAttribute('aria-pressed') === 'true').map((c) => Number(c.dataset.axis));
  const verdict = check(answer, picked);
  chips.forEach((chip, i) => {
    chip.disabled = true;
    const on = picked.includes(i);
    const want = answer.axes.includes(i);
    chip.classList.toggle('right', on && want);
    chip.classList.toggle('wrong', on && !want);
    chip.classList.toggle('ans', !on && want);
  });
  panel.body.querySelector('[data-submit]').disabled = true;
  const yours = picked.length ? `${picked.length === 1 ? 'axis' : 'axes'} ${picked.sort((a, b) => a - b).join(', ')}` : 'no axis';
  panel.finish(verdict.right, verdictMessage(panel.item, verdict, { yours: verdict.right ? '' : yours, noun: 'axis' }));
}
