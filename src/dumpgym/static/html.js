// The one way this page builds markup: a tagged template that escapes every interpolated value.
// Nested `html` results pass through unescaped; arrays are joined; null, undefined and false vanish.

const ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Markup that has already been escaped. */
export class Html {
  constructor(text) { this.text = text; }
  toString() { return this.text; }
}

/** Escape text for use in HTML content or a quoted attribute. */
export function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

function part(value) {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(part).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(value);
}

/** Tagged template: html`<p>${text}</p>` escapes `text`. */
export function html(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += part(values[i]) + strings[i + 1];
  return new Html(out);
}

/** Replace an element's content with markup made by `html`; anything else is refused. */
export function render(element, markup) {
  if (!(markup instanceof Html)) throw new TypeError('render() takes markup made by html``');
  element.innerHTML = markup.text;
}

/** Prose whose `backticked` spans are code, as the drill feedback and op cards write it. */
export function ticks(text) {
  const parts = String(text).split('`');
  if (parts.length % 2 === 0) return html`${text}`;
  return html`${parts.map((p, i) => (i % 2 ? html`<code>${p}</code>` : p))}`;
}

/** "1 fusion", "7 fusions": a count and its noun (`many` for an irregular plural). */
export function plural(n, word, many = `${word}s`) {
  return `${n} ${n === 1 ? word : many}`;
}
