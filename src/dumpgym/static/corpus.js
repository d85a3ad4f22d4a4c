// The corpus: each program's source, jaxpr and StableHLO behind tabs (those listings are in the page),
// and its compiled HLO, fetched from the program's JSON the first time its tab opens.
import { html, render } from './html.js';
import { getJSON, programURL } from './data.js';

/** A plain listing with the same line elements as the highlighted ones. */
export function plainListing(text, layer) {
  return html`<pre class="ls" data-layer="${layer}"><code>${
    text.split('\n').map((line, i) => html`<span data-line="${i + 1}">${line}\n</span>`)}</code></pre>`;
}

/** The compiled HLO of a program, as a listing (fetched once). */
export async function hloListing(slug) {
  const program = await getJSON(programURL(slug));
  return program.hlo?.text ?? '';
}

async function fill(panel, slug) {
  if (!panel.hasAttribute('data-lazy')) return;
  panel.removeAttribute('data-lazy');
  try {
    render(panel, plainListing(await hloListing(slug), 'hlo'));
  } catch (e) {
    panel.setAttribute('data-lazy', '');
    render(panel, html`<p class="empty">Could not load the compiled HLO (${e.message}).</p>`);
  }
}

/** Wire the layer tabs of every program in the corpus section. */
export function registerCorpus(root) {
  function select(article, layer, focus) {
    for (const tab of article.querySelectorAll('[data-layer-tab]')) {
      const on = tab.dataset.layerTab === layer;
      tab.setAttribute('aria-selected', String(on));
      tab.tabIndex = on ? 0 : -1;
      if (on && focus) tab.focus();
    }
    for (const panel of article.querySelectorAll('[data-layer-panel]')) {
      panel.hidden = panel.dataset.layerPanel !== layer;
      if (!panel.hidden) fill(panel, article.dataset.program);
    }
  }
  root.addEventListener('click', (e) => {
    const tab = e.target.closest('[data-layer-tab]');
    if (tab) select(tab.closest('article'), tab.dataset.layerTab, false);
  });
  root.addEventListener('keydown', (e) => {
    const tab = e.target.closest('[data-layer-tab]');
    if (!tab) return;
    const tabs = [...tab.parentElement.querySelectorAll('[data-layer-tab]')];
    const i = tabs.indexOf(tab);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    select(tab.closest('article'), tabs[(to + tabs.length) % tabs.length].dataset.layerTab, true);
  });
}
