// The compiled layer: XLA's HLO for a program, highlighted at build time and fetched when a section
// shows it, and what the x-ray needs to read it: which lines are XLA's own, which are fusions and
// which equations each absorbed, and which backend compiled it. All of it computed from the
// program's compiled layer (`compiled[target]` of its record), once per program.
import { html, plural } from './html.js';
import { getJSON, hloURL, listingMarkup } from './data.js';

/** The compiled HLO of a program for a compile target id (`tpu`, `cpu`, ...) as a listing with one `[data-line]` per line (fetched once). */
export async function hloListing(slug, target) {
  return listingMarkup('hlo', (await getJSON(hloURL(slug, target))).lines);
}

/** A program's compiled listing for a compile target id, and what compiled it as the listing file says
 * (`compiled_by`: the record's backend, versions, device kind and host), fetched once. */
export async function compiledListing(slug, target) {
  const data = await getJSON(hloURL(slug, target));
  return { markup: listingMarkup('hlo', data.lines), by: data.compiled_by };
}

/** The record's compiled layer for a compile target id (`compiled[target]`), or null where the program has none. */
export const compiledLayer = (program, target) => program.compiled?.[target] ?? null;

/** A TPU topology as people say it: "v5e:2x2" -> "v5e, 2×2". */
export function topologyWords(topology) {
  const [generation, shape] = (topology || '').split(':');
  return shape ? `${generation}, ${shape.replaceAll('x', '×')}` : generation || '';
}

/** Instructions and fusions by line, and each fusion's body: the lines of the computation it calls. */
export function indexCompiled(hlo) {
  const text = hlo.text.split('\n');
  const instructions = new Map(hlo.instructions.map((ins) => [ins.line, ins]));
  const fusions = new Map(hlo.fusions.map((f) => [f.line, f]));
  const spans = new Map(); // computation -> [first, last] instruction line
  for (const ins of hlo.instructions) {
    const s = spans.get(ins.computation);
    if (!s) spans.set(ins.computation, [ins.line, ins.line]);
    else { s[0] = Math.min(s[0], ins.line); s[1] = Math.max(s[1], ins.line); }
  }
  // Each equation XLA folded into another's instruction (it has none of its own): where, by which rule.
  const folded = new Map();
  for (const ins of hlo.instructions) {
    for (const a of ins.absorbed ?? []) {
      if (!folded.has(a.eqn)) folded.set(a.eqn, []);
      folded.get(a.eqn).push({ name: ins.name, line: ins.line, rule: a.rule });
    }
  }
  const bodies = new Map();
  for (const f of hlo.fusions) {
    // The record does not say which computation a fusion calls; its printed line does.
    const called = /\bcalls=%([\w.-]+)/.exec(text[f.line - 1] ?? '')?.[1];
    const span = called && spans.get(called);
    // The body's signature line sits just above its first instruction, its closing brace just below.
    if (span) bodies.set(f.line, { name: called, lines: range(span[0] - 1, span[1] + 1) });
  }
  return { instructions, fusions, bodies, folded };
}

// docs/corpus.md's rules by which an equation's work is folded into another equation's instruction.
const FOLDED_BY = { 2: 'rule 2, folded into the one equation reading it', 3: 'rule 3, the same work kept once' };

/** "it also does equation 7's work (rule 2, ...)" for an instruction that absorbed folded equations, else ''. */
function absorbedNote(ins) {
  const absorbed = ins.absorbed ?? [];
  if (!absorbed.length) return '';
  return `it also does the work of ${absorbed.map((a) => `equation ${a.eqn} (${FOLDED_BY[a.rule] ?? `rule ${a.rule}`})`)
    .join(', ')}, which XLA folded into it: no instruction of ${absorbed.length > 1 ? 'their' : 'its'} own`;
}

/** For equations lit from the jaxpr or StableHLO, which instruction absorbed each one XLA folded away
 * ("equation 7 has no instruction of its own: folded into %add.3 (rule 2)"), or ''. */
export function foldedNote(compiled, eqns) {
  const said = [];
  for (const e of new Set(eqns)) {
    const into = compiled?.folded.get(e);
    if (!into) continue;
    const where = into.slice(0, 2).map((x) => `%${x.name}`).join(', ') + (into.length > 2 ? ` and ${into.length - 2} more` : '');
    said.push(`equation ${e} has no instruction of its own: folded into ${where} (rule ${into[0].rule})`);
  }
  return said.join('; ');
}

function range(a, b) {
  const out = [];
  for (let n = a; n <= b; n++) out.push(n);
  return out;
}

/** "compiled by XLA for cpu (jaxlib 0.10.2) — a TPU or GPU would fuse differently", for a TPU layer
 * "compiled for TPU v5 lite (v5e, 2×2), without a TPU (libtpu 0.0.42.1, jaxlib 0.10.2)", and for a GPU
 * layer "compiled for NVIDIA H100 80GB HBM3 (1 GPU), without a GPU: default GEMM configurations, not
 * autotuned (jax-cuda12-plugin 0.10.2, jaxlib 0.10.2)", from the record. A dump's layer (neither a host, as the
 * gym's CPU compiles name, nor a topology, as its TPU and GPU compiles do: the gym did not compile it)
 * "compiled for NVIDIA H100 80GB HBM3 by the run that wrote the dump": that run's versions the dump does not say. */
export function backendNote(hlo) {
  if (!hlo.host && !hlo.topology) return `compiled for ${hlo.device_kind || hlo.backend || 'an unnamed backend'} by the run that wrote the dump`;
  if (hlo.backend === 'tpu') {
    return `compiled for ${hlo.device_kind || 'a TPU'} (${topologyWords(hlo.topology)}), without a TPU (libtpu ${
      hlo.libtpu_version}, jaxlib ${hlo.jaxlib_version})`;
  }
  if (hlo.backend === 'gpu') {
    // "h100:1x1x8": eight GPUs. XLA could time no kernel without one, so each GEMM kept its default tiles.
    const gpus = (hlo.topology || '').split(':')[1]?.split('x').reduce((n, d) => n * Number(d), 1) || 1;
    return `compiled for ${hlo.device_kind || 'a GPU'} (${plural(gpus, 'GPU')}), without a GPU: `
      + `default GEMM configurations, not autotuned (jax-cuda12-plugin ${hlo.cuda_plugin_version}, jaxlib ${hlo.jaxlib_version})`;
  }
  const jaxlib = hlo.jaxlib_version ? ` (jaxlib ${hlo.jaxlib_version})` : '';
  const other = hlo.backend === 'cpu' ? 'a TPU or GPU' : 'another backend';
  return `compiled by XLA for ${hlo.backend || 'an unnamed backend'}${jaxlib} — ${other} would fuse differently`;
}

/** "7 fusions · 23 of 76 instructions from equations (4 inferred) · 53 XLA's own", from the record's stats. */
export function compiledStats(hlo) {
  const s = hlo.stats || {};
  return [
    plural(s.fusions ?? hlo.fusions.length, 'fusion'),
    `${s.attributed} of ${plural(s.instructions, 'instruction')} from equations${s.inferred ? ` (${s.inferred} inferred)` : ''}`,
    `${s.compiler_own} XLA's own`,
  ].join(' · ');
}

/** What the record says about the instruction on compiled line `n`, by how its equations are known
 * (`via`), and which equations XLA folded into it: '' for a line that is no instruction, or one whose tag
 * names its equations and that absorbed none. */
export function instructionNote(compiled, n) {
  const ins = compiled.instructions.get(n);
  if (!ins) return '';
  const which = `${ins.eqns.length > 1 ? 'equations' : 'equation'} ${ins.eqns.join(', ')}`;
  const absorbed = absorbedNote(ins);
  if (ins.via === 'none') return `XLA's own: no equation wrote this (${ins.opcode} in %${ins.computation})`;
  if (ins.via === 'inferred') return `XLA dropped this instruction's metadata; it computes ${which} (inferred)${absorbed ? `; ${absorbed}` : ''}`;
  if (ins.via === 'region') return `inside a reducer region: it computes its holder's ${which}${absorbed ? `; ${absorbed}` : ''}`;
  return absorbed ? `its tag names ${which}; ${absorbed}` : '';
}

/** Why a compiled line lights no equation. */
export function whyCompiled(compiled, n, text) {
  const t = text.trim();
  const ins = compiled.instructions.get(n);
  const note = instructionNote(compiled, n);
  if (ins && !ins.eqns.length) return note;
  if (ins) return `${note || `from ${plural(ins.eqns.length, 'equation')} ${ins.eqns.join(', ')}`}, which the x-ray has no group for`;
  if (!t) return 'an empty line';
  if (/^HloModule\b/.test(t)) return "structural line: the module header and its entry computation's layout";
  if (/^(ENTRY\s+)?%[\w.-]+\s*\(/.test(t)) return "structural line: a computation's signature; its parameters follow";
  if (/^\}/.test(t)) return 'closes a computation';
  return 'structural line: not an instruction';
}

/** The fusion list: each fusion, its kind and line, and the equations it absorbed (or that XLA made it). */
export function fusionList(hlo, groupOf, eqns, band, unit = 'equation', layer = 'jaxpr') {
  return html`<ol class="fusions" aria-label="fusions">${hlo.fusions.map((f) => html`<li><button type="button" data-fusion-line="${f.line}">
    <code>%${f.name}</code> <span class="tag">${f.kind}</span> <span class="count">HLO ${f.line}</span> ${
    f.eqns.length
      ? html`<span class="count">absorbed ${plural(f.eqns.length, unit)}:</span> ${f.eqns.map((id) => {
        const e = eqns.get(id);
        const g = groupOf.get(id);
        const where = e ? `${e.primitive} · ${layer} ${e.jaxpr_lines[0]}` : `${unit} ${id}`;
        return html`<span class="grp${g === undefined ? '' : ` b${band(g)}`}">${where}</span>`;
      })}`
      : html`<span class="own">XLA's own: no equation wrote this</span>`}</button></li>`)}</ol>`;
}
