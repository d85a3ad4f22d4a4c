// The learner's own programs (`dumpgym add`): the path's "your programs" box lists each with the drills
// that ask of it, counted from the drill panels' `data-pool` (`slug:count:weight`), and each added
// program's card gets a line: which compiled layers it has and what each compile it lacks would add (from
// the corpus section's `data-hlo-adds`, computed from the pool once). All of it read off the page.
import { html, render } from './html.js';
import { programTitle } from './data.js';

/** A drill kind's title, as its tab says it. */
const kindTitle = (kind) => document.querySelector(`#tab-${CSS.escape(kind)}`)?.firstChild?.textContent.trim() ?? kind;

/** Each of `slugs` with the drill kinds that have items of it and how many, in tab order. */
function drilled(slugs) {
  const counts = new Map(slugs.map((slug) => [slug, []]));
  for (const panel of document.querySelectorAll('#drills section[data-drill]')) {
    for (const entry of (panel.dataset.pool ?? '').split(' ')) {
      const [slug, count] = entry.split(':');
      if (counts.has(slug) && Number(count) > 0) counts.get(slug).push([panel.dataset.drill, Number(count)]);
    }
  }
  return counts;
}

/**
 * Give each added program's card a line: the compiled layers it has (its `.layers` block's `data-compiled`,
 * `cpu:LINES tpu:LINES`), then, for each compile target it lacks, the drills that target's compile would add
 * (the corpus section's `data-hlo-adds`: [id, label, flag, kinds]), and how to add one.
 */
function fillCompiles(corpus, slugs) {
  const adds = JSON.parse(corpus?.dataset.hloAdds ?? '[]');
  const label = (t) => adds.find(([id]) => id === t)?.[1] ?? t.toUpperCase();
  for (const slug of slugs) {
    const meta = document.querySelector(`#p-${CSS.escape(slug)} header .meta`);
    if (!meta) continue;
    const have = (meta.closest('article').querySelector('[data-layers]')?.dataset.compiled ?? '')
      .split(' ').filter(Boolean).map((entry) => entry.split(':')[0]);
    const missing = adds.filter(([id, , , kinds]) => !have.includes(id) && kinds.length);
    // A dump's module was compiled by the run that wrote it: no flag of `add` compiles it again, a run's dump does.
    const dumped = meta.closest('article').hasAttribute('data-dumped');
    const line = document.createElement('p');
    line.className = 'meta';
    line.dataset.compiles = missing.map(([id]) => id).join(' ');
    const none = dumped ? 'no compiled layer (the dump holds no optimised HLO of it)' : html`no compiled layer (added without <code>--hlo</code>)`;
    render(line, html`${have.length ? `compiled for ${have.map(label).join(', ')}` : none}${
      missing.map(([, name, flag, kinds]) => html` · ${dumped ? `a dump compiled for ${name}` : html`<code>${flag}</code>`} would add ${name} items of ${kinds.map((k, i) => html`${
        i ? '; ' : ''}<a href="#drill-${k}" data-open-drill="${k}">${kindTitle(k)}</a>`)}`)}${
      !missing.length ? '' : dumped ? html` (a run's dump on it, added with <code>dumpgym add --dump</code>)`
        : html` (<code>dumpgym add … --replace</code> with it: one target an add)`}`);
    meta.after(line);
  }
}

export function registerYours(box, corpus) {
  const slugs = (document.querySelector('#drills')?.dataset.yours ?? '').split(' ').filter(Boolean);
  fillCompiles(corpus, slugs);
  const list = box?.querySelector('[data-yours-list]');
  if (!list) return;
  const counts = drilled(slugs);
  render(list, html`${slugs.map((slug) => {
    const kinds = counts.get(slug);
    const missing = (document.querySelector(`#p-${CSS.escape(slug)} [data-compiles]`)?.dataset.compiles ?? '').split(' ').filter(Boolean);
    const flags = JSON.parse(corpus?.dataset.hloAdds ?? '[]');
    return html`<li data-yours-program="${slug}"><a href="#p-${slug}"><bdi>${programTitle(slug)}</bdi></a> · <a href="#xray" data-xray-open="${slug}">x-ray</a> · ${
      kinds.length ? html`asked in ${kinds.map(([k, n], i) => html`${i ? '; ' : ''}<a href="#drill-${k}" data-open-drill="${k}" data-yours-kind="${k}">${kindTitle(k)}</a> (<data value="${n}">${n}</data>)`)}`
        : 'no drill items of its own yet'}${
      !missing.length ? '' : document.querySelector(`#p-${CSS.escape(slug)}`)?.hasAttribute('data-dumped')
        ? html` · more from a dump compiled for ${missing.map((t, i) => html`${i ? ', ' : ''}${flags.find(([id]) => id === t)[1]}`)}`
        : html` · more with ${missing.map((t, i) => html`${i ? ', ' : ''}<code>${flags.find(([id]) => id === t)[2]}</code>`)}`}</li>`;
  })}`);
}
