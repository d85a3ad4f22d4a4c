// An item's context ("dumpgym.drills/2"): blocks that are plain text, or references to lines of one of the
// program's listings (or, where a block names another `program`, of that one's: a change's other compile), resolved here into the text the page shows. The same rule as Python's
// `dumpgym.drills.item.resolve`, read from the listings the page already fetches; a browser test
// compares the two.
import { getJSON, hloURL, listingsURL } from './data.js';

// A compiled line's trailing attributes, which a `cut` block leaves out (as `_tpu.short` does).
const TAIL = /, (?:metadata|backend_config|frontend_attributes|sharding|operand_layout_constraints)=/;
const COMPILED = new Set(['cpu', 'tpu', 'gpu']);

/** A highlighted line (a list of runs: text, or [class, text, anchor?]) as plain text. */
const plain = (runs) => runs.map((r) => (typeof r === 'string' ? r : r[1])).join('');

/** A layer's lines as plain text, fetched once per program and layer. */
async function layerLines(slug, layer) {
  const data = COMPILED.has(layer) ? (await getJSON(hloURL(slug, layer))).lines : (await getJSON(listingsURL(slug)))[layer];
  if (!Array.isArray(data)) throw new Error(`${slug} has no ${layer} listing`);
  return data.map(plain);
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
    const lines = await layers.get(key);
    const [first, last] = block.lines;
    const rows = [];
    for (let n = first; n <= last; n++) {
      let row = lines[n - 1] ?? '';
      if (block.cut) row = row.trim().split(TAIL)[0];
      else if (block.strip) row = row.trim();
      if (block.numbered) row = `${String(n).padStart(3)}  ${row}`;
      rows.push(row);
    }
    out.push(rows.join('\n'));
  }
  return out;
}
