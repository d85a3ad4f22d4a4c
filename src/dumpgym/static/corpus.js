// The corpus: each program's source, jaxpr and StableHLO behind tabs, and its compiled HLO, with a switch
// between the layers it was compiled for (as the x-ray has). All of it is highlighted at build time and
// fetched when shown: a program's listings as it nears the screen, a compiled layer the first time it is
// shown. The page's first load does not grow with the corpus.
import { html, render } from './html.js';
import { listing } from './data.js';
import { onTabKeys, selectTab } from './tabs.js';

/** Show one compiled layer of a program in its panel: the listing and, above it, what compiled it. */
async function showCompiled(panel, slug, target) {
  const { compiledListing, backendNote } = await import('./compiled.js');  // only when a compiled tab first opens
  const holder = panel.querySelector('[data-compiled-listing]');
  panel.dataset.shown = target;
  const { markup, by } = await compiledListing(slug, target);
  if (panel.dataset.shown !== target) return;  // another layer was picked meanwhile
  panel.querySelector('[data-compiled-backend]').textContent = `${backendNote(by)}${by.host ? ` · host ${by.host}` : ''}`;
  render(holder, markup);
}

async function fill(panel, slug) {
  if (!panel.hasAttribute('data-lazy')) return;
  panel.removeAttribute('data-lazy');
  const layer = panel.dataset.layerPanel;
  const into = layer === 'hlo' ? panel.querySelector('[data-compiled-listing]') : panel;
  try {
    if (layer === 'hlo') await showCompiled(panel, slug, panel.closest('[data-target]').dataset.target);
    else panel.replaceChildren(await listing(slug, layer));
  } catch (e) {
    panel.setAttribute('data-lazy', '');
    const what = layer === 'hlo' ? 'the compiled HLO' : `the ${layer} listing`;
    render(into, html`<p class="empty">Could not load ${what} (${e.message}).</p>`);
  }
}

/** Switch a program's compiled panel to another of its layers: the switch, the tab's label and count, the listing. */
function switchCompiled(button) {
  const article = button.closest('article');
  const box = article.querySelector('[data-target]');
  const panel = article.querySelector('[data-layer-panel="hlo"]');
  const target = button.dataset.compiledTarget;
  if (box.dataset.target === target) return;
  for (const b of panel.querySelectorAll('[data-compiled-target]')) b.setAttribute('aria-pressed', String(b === button));
  box.dataset.target = target;
  const tab = article.querySelector('[data-layer-tab="hlo"]');
  tab.querySelector('[data-tab-backend]').textContent = button.textContent.trim();
  tab.querySelector('.count').textContent = button.dataset.lines;
  panel.setAttribute('data-lazy', '');
  fill(panel, article.dataset.program);
}

const LABELS = { source: 'source', jaxpr: 'jaxpr', stablehlo: 'StableHLO', hlo: 'compiled HLO' };

/** An article's layer tabs and panels, from its `data-layers` ("source:12 jaxpr:30 ..."), jaxpr selected. */
function layers(article) {
  const box = article.querySelector('[data-layers]');
  const slug = article.dataset.program;
  const counts = box.dataset.layers.split(' ').map((e) => e.split(':'));
  const id = (what, layer) => `${what}-${slug}-${layer}`;
  // The program's compiled layers, first shown first, each with its registry button (made once, at build time).
  const compiled = (box.dataset.compiled || '').split(' ').filter(Boolean).map((e) => e.split(':'));
  const choices = document.querySelector('template[data-compiled-choices]')?.content;
  const button = (target) => choices?.querySelector(`[data-compiled-target="${CSS.escape(target)}"]`);
  const label = compiled.length ? button(compiled[0][0])?.textContent ?? compiled[0][0] : '';
  const waiting = (layer) => (layer === 'hlo'
    ? html`<div class="compiled-head" data-compiled-head><p class="fine" data-compiled-backend></p></div>
      <div data-compiled-listing><p class="empty">the ${label} compile loads when you open this tab</p></div>`
    : html`<p class="empty">loading the ${LABELS[layer]} listing…</p>`);
  const name = (layer) => (layer === 'hlo'
    ? html`${LABELS[layer]} <span class="by" data-tab-backend>${label}</span>` : LABELS[layer]);
  render(box, html`<div class="tabs small" role="tablist" aria-label="${slug} layers">${counts.map(([layer, n]) => html`
    <button type="button" role="tab" id="${id('t', layer)}" aria-controls="${id('l', layer)}" aria-selected="${layer === 'jaxpr'}"
      tabindex="${layer === 'jaxpr' ? 0 : -1}" data-layer-tab="${layer}">${name(layer)} <span class="count">${n}</span></button>`)}</div>${
    counts.map(([layer]) => html`<div class="layer" role="tabpanel" id="${id('l', layer)}" aria-labelledby="${id('t', layer)}"
      data-layer-panel="${layer}" data-lazy ${layer === 'jaxpr' ? '' : html`hidden`}>${waiting(layer)}</div>`)}`);
  box.removeAttribute('data-layers');
  // The switch between the program's compiled layers, when it has two or more: only the layers it has.
  if (compiled.length < 2) return;
  const group = document.createElement('span');
  group.className = 'targets';
  group.setAttribute('role', 'group');
  group.setAttribute('aria-label', 'compiled for');
  compiled.forEach(([target, n], i) => {
    const b = button(target).cloneNode(true);
    b.dataset.lines = n;
    b.setAttribute('aria-pressed', String(i === 0));
    group.append(b);
  });
  box.querySelector('[data-compiled-head]').prepend(group);
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
    const choice = e.target.closest('[data-compiled-target]');
    if (choice) switchCompiled(choice);
  });
  onTabKeys(root, (e) => {
    const tab = e.target.closest('[data-layer-tab]');
    if (!tab) return null;
    const tabs = [...tab.parentElement.querySelectorAll('[data-layer-tab]')];
    return { tabs, i: tabs.indexOf(tab) };
  }, (tab) => select(tab, true));
}
