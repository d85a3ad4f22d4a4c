// The corpus: each program's source, jaxpr and StableHLO behind tabs, and its compiled HLO. All of it is
// highlighted at build time and fetched when shown: a program's listings as it nears the screen, its
// compiled HLO the first time its tab opens. The page's first load does not grow with the corpus.
import { html, render } from './html.js';
import { listing } from './data.js';
import { onTabKeys, selectTab } from './tabs.js';

async function fill(panel, slug) {
  if (!panel.hasAttribute('data-lazy')) return;
  panel.removeAttribute('data-lazy');
  const layer = panel.dataset.layerPanel;
  try {
    if (layer === 'hlo') {
      const { hloListing } = await import('./compiled.js');  // only when a compiled tab first opens
      // The layer compiled for the platform the program lowered for (a Pallas kernel's: the TPU's).
      render(panel, await hloListing(slug, panel.closest('[data-target]').dataset.target));
    } else {
      panel.replaceChildren(await listing(slug, layer));
    }
  } catch (e) {
    panel.setAttribute('data-lazy', '');
    const what = layer === 'hlo' ? 'the compiled HLO' : `the ${layer} listing`;
    render(panel, html`<p class="empty">Could not load ${what} (${e.message}).</p>`);
  }
}

const LABELS = { source: 'source', jaxpr: 'jaxpr', stablehlo: 'StableHLO', hlo: 'compiled HLO' };

/** An article's layer tabs and panels, from its `data-layers` ("source:12 jaxpr:30 ..."), jaxpr selected. */
function layers(article) {
  const box = article.querySelector('[data-layers]');
  const slug = article.dataset.program;
  const counts = box.dataset.layers.split(' ').map((e) => e.split(':'));
  const id = (what, layer) => `${what}-${slug}-${layer}`;
  const waiting = (layer) => (layer === 'hlo'
    ? html`<p class="empty">the ${box.dataset.backend || ''} compiler's HLO loads when you open this tab</p>`
    : html`<p class="empty">loading the ${LABELS[layer]} listing…</p>`);
  render(box, html`<div class="tabs small" role="tablist" aria-label="${slug} layers">${counts.map(([layer, n]) => html`
    <button type="button" role="tab" id="${id('t', layer)}" aria-controls="${id('l', layer)}" aria-selected="${layer === 'jaxpr'}"
      tabindex="${layer === 'jaxpr' ? 0 : -1}" data-layer-tab="${layer}">${LABELS[layer]} <span class="count">${n}</span></button>`)}</div>${
    counts.map(([layer]) => html`<div class="layer" role="tabpanel" id="${id('l', layer)}" aria-labelledby="${id('t', layer)}"
      data-layer-panel="${layer}" data-lazy ${layer === 'jaxpr' ? '' : html`hidden`}>${waiting(layer)}</div>`)}`);
  box.removeAttribute('data-layers');
}

/** Wire the layer tabs of every program in the corpus section: each program's are made as it nears the screen. */
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
  const near = new IntersectionObserver((entries) => {
    for (const en of entries) {
      if (!en.isIntersecting) continue;
      near.unobserve(en.target);
      layers(en.target);
      fill(en.target.querySelector('[data-layer-panel="jaxpr"]'), en.target.dataset.program);
    }
  }, { rootMargin: '800px 0px' });
  for (const article of root.querySelectorAll('article[data-program]')) near.observe(article);
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
