// The corpus: each program's source, jaxpr and StableHLO behind tabs (those listings are in the page),
// and its compiled HLO, highlighted at build time and fetched the first time its tab opens.
import { html, render } from './html.js';
import { onTabKeys, selectTab } from './tabs.js';

async function fill(panel, slug) {
  if (!panel.hasAttribute('data-lazy')) return;
  panel.removeAttribute('data-lazy');
  try {
    const { hloListing } = await import('./compiled.js');  // only when a compiled tab first opens
    render(panel, await hloListing(slug));
  } catch (e) {
    panel.setAttribute('data-lazy', '');
    render(panel, html`<p class="empty">Could not load the compiled HLO (${e.message}).</p>`);
  }
}

/** Wire the layer tabs of every program in the corpus section. */
export function registerCorpus(root) {
  function select(tab, focus) {
    const article = tab.closest('article');
    const layer = tab.dataset.layerTab;
    selectTab(article.querySelectorAll('[data-layer-tab]'), tab, focus);
    for (const panel of article.querySelectorAll('[data-layer-panel]')) {
      panel.hidden = panel.dataset.layerPanel !== layer;
      if (!panel.hidden) fill(panel, article.dataset.program);
    }
  }
  root.addEventListener('click', (e) => {
    const tab = e.target.closest('[data-layer-tab]');
    if (tab) select(tab, false);
  });
  onTabKeys(root, (e) => {
    const tab = e.target.closest('[data-layer-tab]');
    if (!tab) return null;
    const tabs = [...tab.parentElement.querySelectorAll('[data-layer-tab]')];
    return { tabs, i: tabs.indexOf(tab) };
  }, (tab) => select(tab, true));
}
