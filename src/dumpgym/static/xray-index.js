// What the x-ray computes once per program, before any hover: which groups each line of each layer
// lights, the stats line, and why a line no group holds is dim.
import { html } from './html.js';

export const LAYERS = ['jaxpr', 'stablehlo', 'hlo'];
export const NAMES = { jaxpr: 'jaxpr', stablehlo: 'StableHLO', hlo: 'HLO' };

/** Line-to-group maps and the groups to light per line (the innermost equations only). A group's
 * compiled lines are its equation's `hlo.lines_by_eqn` entry: a fusion's line is listed there for
 * every equation it absorbed, so hovering it lights all of them. */
export function indexProgram(program) {
  const groups = program.xray || [];
  const eqns = new Map(program.eqns.map((e) => [e.id, e]));
  const ancestors = groups.map((g) => {
    const out = new Set();
    for (let e = eqns.get(g.eqn); e && e.parent !== null && e.parent !== undefined; e = eqns.get(e.parent)) out.add(e.parent);
    return out;
  });
  const compiledLines = program.hlo?.lines_by_eqn ?? {};
  const lines = groups.map((g) => ({
    jaxpr: g.jaxpr_lines, stablehlo: g.stablehlo_lines, hlo: compiledLines[String(g.eqn)] ?? [],
  }));
  const byLine = { jaxpr: new Map(), stablehlo: new Map(), hlo: new Map() };
  lines.forEach((l, i) => {
    for (const layer of LAYERS) for (const n of l[layer]) (byLine[layer].get(n) ?? byLine[layer].set(n, []).get(n)).push(i);
  });
  const groupOf = new Map(groups.map((g, i) => [g.eqn, i]));
  const memo = { jaxpr: new Map(), stablehlo: new Map(), hlo: new Map() };
  /** The groups a line lights: those holding it, minus any container of another one. */
  function lit(layer, n) {
    if (memo[layer].has(n)) return memo[layer].get(n);
    const all = byLine[layer].get(n) ?? [];
    // One pass over the holders' ancestors, not a pair test: a fusion line can hold hundreds of groups.
    const containers = new Set();
    for (const j of all) for (const a of ancestors[j]) containers.add(a);
    const out = all.filter((i) => !containers.has(groups[i].eqn));
    memo[layer].set(n, out);
    return out;
  }
  // The innermost equation printed on each jaxpr line, to explain lines no group holds.
  const owner = new Map();
  for (const e of program.eqns) {
    const [a, b] = e.jaxpr_lines;
    for (let n = a; n <= b; n++) {
      const o = owner.get(n);
      if (!o || o.jaxpr_lines[1] - o.jaxpr_lines[0] >= b - a) owner.set(n, e);
    }
  }
  const order = groups.map((g, i) => i).sort((i, j) =>
    Math.min(...groups[i].jaxpr_lines) - Math.min(...groups[j].jaxpr_lines) || groups[i].eqn - groups[j].eqn);
  return { groups, lines, groupOf, eqns, byLine, lit, owner, order };
}

/** "N mapped equations · a of b jaxpr lines · c of d StableHLO op lines", computed from the groups. */
export function stats(program) {
  const groups = program.xray || [];
  const mapped = new Set(groups.filter((g) => g.stablehlo_lines.length).map((g) => g.eqn));
  const jaxprLines = new Set(groups.flatMap((g) => g.jaxpr_lines));
  const opLines = new Set((program.stablehlo_ops || []).map((o) => o.line));
  const covered = new Set(groups.flatMap((g) => g.stablehlo_lines).filter((n) => opLines.has(n)));
  const none = (program.lowered_to_nothing || []).length;
  const plural = (n, w) => `${n} ${w}${n === 1 ? '' : 's'}`;
  return [
    `${plural(mapped.size, 'mapped equation')} of ${program.eqns.length}`,
    `${jaxprLines.size} of ${program.jaxpr.split('\n').length} jaxpr lines`,
    `${covered.size} of ${opLines.size} StableHLO op lines`,
    none ? `${none} lowered to nothing` : '',
  ].filter(Boolean).join(' · ');
}

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
    for (const [re, why] of STRUCTURE) if (re.test(t)) return `structural line: ${why}`;
    return 'no equation claims this line';
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

/** The first line of a list (no spread: a container's list can be long). */
export function first(lines) {
  let m = Infinity;
  for (const n of lines) if (n < m) m = n;
  return m;
}

/** "jaxpr 7", "StableHLO 14–15", "HLO 32, 33, 98": where a group's lines are in one layer. */
export function where(lines, layer) {
  if (!lines.length) return html`${NAMES[layer]}: none`;
  if (layer === 'hlo' && lines.length <= 3) return html`HLO ${[...lines].sort((a, b) => a - b).join(', ')}`;
  const a = first(lines);
  const b = lines.reduce((m, n) => Math.max(m, n), -Infinity);
  return html`${NAMES[layer]} ${a === b ? a : `${a}–${b}`}`;
}
