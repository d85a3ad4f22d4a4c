// The op reference: cards rendered from data/reference.json when the section comes near (or a link
// to a card is followed), and a search over them with a plain "no ops match" state. What a card is
// found by is the build's (`search`: reference.search_text); the page only folds the query the same way.
import { html, render, ticks } from './html.js';
import { getJSON } from './data.js';

/** A query as the search compares it (reference.fold): lower case, hyphens and underscores dropped. */
export const fold = (text) => text.toLowerCase().replace(/[-_]/g, '');

const links = (label, named) => html`${label} ${named.map(([name, anchor]) => html`<a href="#${anchor}">${name}</a> `)}`;

function card(c) {
  const rows = [['does', c.what], ['prints as', c.looks], ['misread', c.misread]].filter(([, v]) => v);
  const compiled = c.layer === 'hlo' ? 'compiled from' : 'compiled as';
  const parts = [c.pairs.length && links('pairs with', c.pairs), c.compiled.length && links(compiled, c.compiled),
    c.hlo?.length && html`compiled HLO prints it ${c.hlo.map((name) => html`<code>${name}</code> `)}`,
    c.seen_in.length && html`in ${c.seen_in.map((slug) => html`<a href="#p-${slug}">${slug}</a> `)}`].filter(Boolean);
  return html`<article class="card" id="${c.anchor}" data-op="${c.name}" data-search="${c.search}">
    <h3><code>${c.name}</code> <span class="tag">${c.layer}</span>${c.family ? html` <span class="tag">${c.family}</span>` : ''}</h3>
    <dl>${rows.map(([k, v]) => html`<dt>${k}</dt><dd>${ticks(v)}</dd>`)}</dl>
    ${parts.length ? html`<p class="links">${parts.map((p, i) => html`${i ? '· ' : ''}${p}`)}</p>` : ''}
  </article>`;
}

/** The card id a `#op-…` hash names, or '' for any other hash (a malformed one included). */
function cardId(hash) {
  if (!hash.startsWith('#op-')) return '';
  // A hand-edited or truncated link (`#op-%E0%A4%A`) is not valid percent-encoding: ignore it, don't throw.
  try { return decodeURIComponent(hash.slice(1)); } catch { return ''; }
}

/** Wire the op reference section. */
export function registerReference(root) {
  const input = root.querySelector('[data-ref-filter]');
  const count = root.querySelector('[data-ref-count]');
  const empty = root.querySelector('[data-ref-empty]');
  const query = root.querySelector('[data-ref-query]');
  const box = root.querySelector('[data-ref-cards]');
  let cards = null;
  let loading = null;

  function filter() {
    if (!cards) return;
    const words = fold(input.value).split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const c of cards) {
      const match = words.every((w) => c.text.includes(w));
      c.el.hidden = !match;
      shown += match;
    }
    count.textContent = words.length ? `${shown} of ${cards.length} ops` : `${cards.length} ops`;
    query.textContent = input.value.trim();
    empty.hidden = shown > 0;
  }

  function load() {
    loading ??= getJSON(box.dataset.src).then((data) => {
      render(box, html`${data.cards.map(card)}`);
      cards = [...box.querySelectorAll('[data-op]')].map((el) => ({ el, text: el.dataset.search }));
      root.setAttribute('data-ready', '');
      filter();
    }).catch((e) => {
      loading = null;
      render(box, html`<p class="empty">Could not load the op cards (${e.message}).</p>`);
    });
    return loading;
  }

  // Follow a link to a card: load the cards, clear a filter that hides it, bring it into view.
  async function follow() {
    const id = cardId(location.hash);
    if (!id) return;
    await load();
    const target = document.getElementById(id);
    if (!target) return;
    if (target.hidden) { input.value = ''; filter(); }
    box.querySelector('.hit')?.classList.remove('hit');
    target.classList.add('hit');
    target.scrollIntoView({ block: 'start' });
  }

  input.addEventListener('input', () => load().then(filter));
  window.addEventListener('hashchange', follow);
  const near = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) { near.disconnect(); load(); }
  }, { rootMargin: '800px 0px' });
  near.observe(root);
  follow();
}
