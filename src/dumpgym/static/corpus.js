// The corpus: each program's source, jaxpr and StableHLO behind tabs (those listings are in the page),
// and its compiled HLO, highlighted at build time and fetched the first time its tab opens.
import { html, render } from './html.js';
import { hloListing } from './compiled.js';

async function fill(panel, slug) {
  if (!panel.hasAttribute('data-lazy')) return;
  panel.removeAttribute('data-lazy');
  try {
    render(panel, await hloListing(slug));
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
