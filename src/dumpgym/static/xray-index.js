// What the x-ray computes once per program, before any hover, beyond the hover's own index (hover.js):
// the stats line, and why a line no group holds is dim.
import { html, plural } from './html.js';
import { LAYERS, first, indexGroups } from './hover.js';

const LAYER_NAMES = { jaxpr: 'jaxpr', stablehlo: 'StableHLO', hlo: 'HLO' };
/** The layers' names as the status line says them: the program on show may name its columns otherwise. */
export const NAMES = { ...LAYER_NAMES };

/** Name the layers as `names` says (null: as the page prints them). */
export function nameLayers(names) {
  Object.assign(NAMES, names ?? LAYER_NAMES);
}

/** The hover's index, plus what explains a dim line: the innermost equation printed on each jaxpr
 * line, and the StableHLO lines that start an operation (the record's `stablehlo_ops`). */
export function indexProgram(program) {
  const owner = new Map();
  for (const e of program.eqns) {
    const [a, b] = e.jaxpr_lines;
    for (let n = a; n <= b; n++) {
      const o = owner.get(n);
      if (!o || o.jaxpr_lines[1] - o.jaxpr_lines[0] >= b - a) owner.set(n, e);
    }
  }
  const opLines = new Set(program.stablehlo_ops.map((o) => o.line));
  return { ...indexGroups(program), owner, opLines };
}

/** "N mapped equations of E · a of b jaxpr lines · c of d StableHLO op lines", from the record's `xray_stats`. */
export function stats(program) {
  const s = program.xray_stats;
  const none = (program.lowered_to_nothing || []).length;
  return [
    `${plural(s.mapped_equations, 'mapped equation')} of ${s.equations}`,
    `${s.mapped_jaxpr_lines} of ${s.jaxpr_lines} jaxpr lines`,
    `${s.mapped_stablehlo_op_lines} of ${s.stablehlo_op_lines} StableHLO op lines`,
    none ? `${none} lowered to nothing` : '',
  ].filter(Boolean).join(' · ');
}

// What a StableHLO line that starts no operation does, by how it reads. Which lines those are comes
// from the record (`stablehlo_ops`); these only choose the words.
const STRUCTURE = [
  [/^module\b/, 'the module header: a container, not an operation'],
  [/^func\.func\b/, 'a function signature; its arguments are values, not work'],
  [/^(return|stablehlo\.return|sdy\.return|func\.return)\b/, 'hands values back; computes nothing'],
  [/^\}/, 'closes a block'],
  [/^sdy\.mesh\b/, 'declares the device mesh; no equation emits it'],
  [/^(\^bb|reducer\()/, "names a region's block arguments"],
];

/** Why a line belongs to no group. */
export function whyUnmapped(index, program, layer, n, text) {
  const t = text.trim();
  if (!t) return 'an empty line';
  if (layer === 'stablehlo') {
    if (index.opLines.has(n)) return 'no equation claims this line';
    const why = STRUCTURE.find(([re]) => re.test(t))?.[1] ?? 'not an operation';
    return `structural line: ${why}`;
  }
  const e = index.owner.get(n);
  if (e) {
    const gone = (program.lowered_to_nothing || []).find((x) => x.eqn === e.id);
    if (gone) return `lowered to nothing: ${e.primitive} (equation ${e.id}): ${gone.why}`;
    return `equation ${e.id} (${e.primitive}) emits no StableHLO line of its own`;
  }
  if (n === 1) return "structural line: the jaxpr's header and input binders";
  if (/^in \(/.test(t) || /^in \(.*\}\s*$/.test(t)) return 'structural line: the list of results';
  return 'structural line: binders of a (sub-)jaxpr; no equation prints here';
}

/** "jaxpr 7", "StableHLO 14–15", "HLO 32, 33, 98": where a group's lines are in one layer. */
export function where(lines, layer) {
  if (!lines.length) return html`${NAMES[layer]}: none`;
  if (layer === 'hlo' && lines.length <= 3) return html`HLO ${[...lines].sort((a, b) => a - b).join(', ')}`;
  const a = first(lines);
  const b = lines.reduce((m, n) => Math.max(m, n), -Infinity);
  return html`${NAMES[layer]} ${a === b ? a : `${a}–${b}`}`;
}

/** The lines `groups` light in each layer, each once, in order. */
export function litLines(index, groups) {
  const out = {};
  for (const layer of LAYERS) {
    const lines = new Set();
    for (const i of groups) for (const n of index.lines[i][layer]) lines.add(n);
    out[layer] = [...lines].sort((a, b) => a - b);
  }
  return out;
}
