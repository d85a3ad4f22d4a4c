// Where the page's data lives: per-program and per-drill JSON splits, fetched once each, and the
// listings highlighted at build time, built into markup here with the escaping `html` helper.
import { html, render } from './html.js';

const cache = new Map();

/** Fetch a JSON file relative to the page, once; a failure is not cached. */
export function getJSON(url) {
  if (!cache.has(url)) {
    const pending = fetch(url).then((r) => {
      if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
      return r.json();
    });
    pending.catch(() => cache.delete(url));
    cache.set(url, pending);
  }
  return cache.get(url);
}

/** Put the program the learner chose for the x-ray in the URL (`?xray=SLUG#xray`, replacing this entry of the
 * history): a reload or the link shared opens the x-ray on it (app.js reads it back). */
export function rememberXray(slug) {
  const url = new URL(location.href);
  url.searchParams.set('xray', slug);
  url.hash = 'xray';
  history.replaceState(history.state, '', url);
}

/** The URL of one program's corpus record. */
export const programURL = (slug) => `data/programs/${encodeURIComponent(slug)}.json`;

/** The URL of one program's compiled HLO for a compile target id (`tpu`, `gpu`, `cpu`, ...), highlighted at build time ("dumpgym.hlo-listing/1"). */
export const hloURL = (slug, target) => `data/compiled/${encodeURIComponent(target)}/${encodeURIComponent(slug)}.json`;

/** The URL of one drill kind's items for one program (`asked`: the other programs' items it is asked with alone). */
export const drillURL = (kind, slug, asked = false) =>
  `data/drills/${asked ? 'with/' : ''}${encodeURIComponent(kind)}/${encodeURIComponent(slug)}.json`;

/** The URL of one program's highlighted listings, source, jaxpr and StableHLO ("dumpgym.listings/1"). */
export const listingsURL = (slug) => `data/listings/${encodeURIComponent(slug)}.json`;

/**
 * A highlighted listing's markup, one `[data-line]` per line, from its lines of runs: bare text, a
 * `[class, text]` run, or an op name linked to its card, `[class, text, anchor]`.
 */
export function listingMarkup(layer, lines) {
  const run = (r) => (typeof r === 'string' ? r
    : r.length > 2 ? html`<a class="o" href="#${r[2]}">${r[1]}</a>` : html`<span class="${r[0]}">${r[1]}</span>`);
  return html`<pre class="ls" data-layer="${layer}"><code>${lines.map((runs, i) =>
    html`<span data-line="${i + 1}">${runs.map(run)}\n</span>`)}</code></pre>`;
}

/** A new `<pre>` of a program's layer ("source", "jaxpr", "stablehlo"), fetched once per program. */
export async function listing(slug, layer) {
  const holder = document.createElement('div');
  render(holder, listingMarkup(layer, (await getJSON(listingsURL(slug)))[layer]));
  return holder.firstElementChild;
}

/** A program's title as the corpus section prints it. */
export function programTitle(slug) {
  return document.querySelector(`#p-${CSS.escape(slug)} .title`)?.textContent ?? slug;
}

/** The line elements of a listing, indexed from 0 (line 1 is index 0). */
export function lineElements(pre) {
  return pre ? pre.firstElementChild.children : [];
}

/** Whether any part of an element is inside the viewport. */
export function onScreen(el) {
  const r = el.getBoundingClientRect();
  return r.bottom > 0 && r.top < window.innerHeight && r.height > 0;
}

/** Whether a key event belongs to a text field (where letters and digits are typing, not commands). */
export function typing(event) {
  const t = event.target;
  return event.ctrlKey || event.metaKey || event.altKey || t.isContentEditable ||
    ['INPUT', 'SELECT', 'TEXTAREA'].includes(t.tagName);
}
