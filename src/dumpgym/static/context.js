// An item's context ("dumpgym.drills/2"): blocks that are plain text, or references to lines of one of the
// program's listings (or, where a block names another `program`, of that one's: a change's other compile), resolved here into the text the page shows. The same rule as Python's
// `dumpgym.drills.item.resolve`, read from the listings the page already fetches; a browser test
// compares the two.
import { getJSON, hloURL, listingsURL } from './data.js';

const COMPILED = new Set(['cpu', 'tpu', 'gpu']);
// A layer id whose listing is kept under another key in the program's listings file (a dump's HLO before
// optimisations: `hlo-before` in an item, `hlo_before` in the file, as `dumpgym.site.files` writes it).
const LISTING_KEYS = { 'hlo-before': 'hlo_before' };

/** A highlighted line (a list of runs: text, or [class, text, anchor?]) as plain text. */
const plain = (runs) => runs.map((r) => (typeof r === 'string' ? r : r[1])).join('');

/** A layer's lines as plain text, and where a `cut` block cuts each (a compiled instruction's trailing
 * attributes start there, in code points, as the record says: `Instruction.tail`), fetched once per program and layer. */
async function layerLines(slug, layer) {
  const file = COMPILED.has(layer) ? await getJSON(hloURL(slug, layer)) : null;
  const data = file ? file.lines : (await getJSON(listingsURL(slug)))[LISTING_KEYS[layer] ?? layer];
  if (!Array.isArray(data)) throw new Error(`${slug} has no ${layer} listing`);
  return { lines: data.map(plain), cuts: (file && file.cuts) || {} };
}

/** A row as a `cut` block shows it: without its trailing attributes, stripped (as `Instruction.short` does). */
function cutRow(row, at) {
  return (at === undefined ? row : Array.from(row).slice(0, at).join('')).trim();
}

/** The blocks of text an item's `context` shows, in order. */
export async function resolveContext(slug, context) {
  const layers = new Map();
  const out = [];
  for (const block of context ?? []) {
    if (typeof block.text === 'string') { out.push(block.text); continue; }
    const source = block.program ?? slug;
    const key = `${source}/${block.layer}`;
    if (!layers.has(key)) layers.set(key, layerLines(source, block.layer));
    const { lines, cuts } = await layers.get(key);
    const [first, last] = block.lines;
    const rows = [];
    for (let n = first; n <= last; n++) {
      let row = lines[n - 1] ?? '';
      if (block.cut) row = cutRow(row, cuts[n]);
      else if (block.strip) row = row.trim();
      if (block.numbered) row = `${String(n).padStart(3)}  ${row}`;
      rows.push(row);
    }
    out.push(rows.join('\n'));
  }
  return out;
}
