// The answer forms of a drill item (`dumpgym.drills/2`), each with the check that grades a response:
// the same spellings and rules as Python's `dumpgym.drills.answer` (a browser test grades one table of
// cases, tests/answer_cases.py, with both and compares the verdicts). The page renders and checks; what
// is right, and why a wrong answer is wrong, comes from the item.

const LONG = [['bfloat', 'bf'], ['float', 'f'], ['uint', 'u'], ['complex', 'c'], ['int', 'i']];
const DTYPE = /^(?:bool|float0|(?:bf|f|u|i|c)[0-9]+(?:_[a-z0-9]+)*|key<[a-z0-9_]+>)$/;
const DIMS_SPLIT = /\s*(?:,|x|×|\*|\s)\s*/;

/** A dtype as the jaxpr prints it (`bf16`, `i32`, `bool`, `key<fry>`) from a short or numpy name, or null. */
export function readDtype(text) {
  let name = String(text).trim().toLowerCase();
  for (const [word, short] of LONG) {
    if (name.startsWith(word)) { name = short + name.slice(word.length); break; }
  }
  return DTYPE.test(name) ? name : null;
}

// The listings' own spellings of an array type: StableHLO's `tensor<16x32xf32>` (`tensor<f32>` a scalar), and
// a compiled listing's `f32[24,12]{1,0:T(8,128)}`, whose layout in braces says nothing of the shape.
const TENSOR = /^tensor<((?:[0-9]+x)*)([a-z][a-z0-9_]*)>$/;
const LAYOUT = /\{[^{}]*\}$/;

/** [dtype as written, shape as `[16,32]`] of a type the way a listing prints it, or null. */
function listingType(text) {
  const body = String(text).trim().replace(LAYOUT, '').trim();
  const tensor = TENSOR.exec(body);
  if (tensor) return [tensor[2], tensor[1] ? `[${tensor[1].replace(/x$/, '').split('x').join(',')}]` : '[]'];
  const typed = /^([A-Za-z][A-Za-z0-9_]*)\s*(\[[0-9,\s]*\])$/.exec(body);
  return typed ? [typed[1], typed[2]] : null;
}

/** A shape as `[64,512]` from `[64, 512]`, `(64, 512)`, `64x512`, `64 512` (`[]`, `()`: a scalar), or as a
 *  listing prints it with its dtype (`f32[64,512]`, `f32[64,512]{1,0}`, `tensor<64x512xf32>`), or null. */
export function readShape(text) {
  const listed = listingType(text);
  if (listed && readDtype(listed[0]) !== null) return readShape(listed[1]);
  let body = String(text).trim();
  const ends = body.slice(0, 1) + body.slice(-1);
  if (ends === '[]' || ends === '()') body = body.slice(1, -1).trim();
  else if (!body) return null;
  body = body.replace(/,+$/, '').trim();
  if (!body) return '[]';
  const dims = body.split(DIMS_SPLIT);
  if (!dims.every((d) => /^[0-9]+$/.test(d))) return null;
  return `[${dims.map((d) => BigInt(d).toString()).join(',')}]`;
}

/** An array type as the jaxpr prints it (`bf16[64,512]`) from `bfloat16[64, 512]`, `bf16 (64, 512)`,
 *  `f32[]` or a bare `f32` (a scalar), or as the other listings print it (`tensor<64x512xbf16>`,
 *  `bf16[64,512]{1,0}`), or null. */
export function readAval(text) {
  const listed = listingType(text);
  const match = /^([A-Za-z][A-Za-z0-9_]*(?:<[a-z0-9_]+>)?)\s*([\s\S]*)$/.exec(listed ? listed.join('') : String(text).trim());
  if (!match) return null;
  const dtype = readDtype(match[1]);
  const shape = match[2].trim() ? readShape(match[2]) : '[]';
  return dtype === null || shape === null ? null : dtype + shape;
}

/** A whole number from `1024`, `1,024`, `1_024` or `1 024`, or null. */
export function readInt(text) {
  const body = String(text).trim();
  if (!/^(?:[+-]?[0-9]{1,3}(?:[,_ ][0-9]{3})+|[+-]?[0-9]+)$/.test(body)) return null;
  return BigInt(body.replace(/[,_ ]/g, '')).toString();
}

/** A layout's tiling as `(8,128)` or `(8,128)(2,1)` from `T(8,128)(2,1)`, `(8, 128)`, `8x128`, or null. */
export function readTile(text) {
  let body = String(text).trim();
  if (body.startsWith('T') || body.startsWith('t')) body = body.slice(1).trim();
  const inner = (shape) => (shape === null || shape === '[]' ? null : `(${shape.slice(1, -1)})`);
  if (!body.includes('(')) return inner(readShape(body));
  if (!/^(?:\s*\([^()]*\)\s*)+$/.test(body)) return null;
  let out = '';
  for (const [, part] of body.matchAll(/\(([^()]*)\)/g)) {
    const tile = part.trim() ? inner(readShape(part)) : null;
    if (tile === null) return null;
    out += tile;
  }
  return out;
}

/** How a typed answer is read, by its form's `spelling`: the reader, and the examples the page shows
 *  (the first is Python's, in "write it like ..."; the page shows one that is not the answer). */
export const SPELLINGS = Object.freeze({
  aval: { read: readAval, examples: ['bf16[64,512]', 'f32[8,128]'] },
  shape: { read: readShape, examples: ['[64,512]', '[8,128]'] },
  dtype: { read: readDtype, examples: ['bf16', 'f32'] },
  int: { read: readInt, examples: ['1024', '96'] },
  tile: { read: readTile, examples: ['(8,128)', '(16,128)(2,1)'] },
});

/** An example of a spelling that does not read as any right answer of `answer` (placeholder and hint). */
export function exampleFor(answer) {
  const { read, examples } = SPELLINGS[answer.spelling];
  const right = new Set([answer.value, ...(answer.accepted ?? [])].map((v) => read(v)));
  return examples.find((e) => !right.has(read(e))) ?? examples[0];
}

/** A verdict, as Python's `Verdict.to_json` writes it. */
const verdict = (right, { readable = true, missing = [], extra = [], reason = null, rule = null } = {}) =>
  ({ right, readable, missing, extra, reason, rule });

const isInt = (n) => Number.isInteger(n);
const sorted = (ns) => [...ns].sort((a, b) => a - b);

/** A set of axes as the `misread` map keys it: sorted, comma-separated (`"0,2"`; `""` for none). */
export const axesKey = (axes) => sorted(new Set(axes)).join(',');

/** Each form's check: (answer as the pool writes it, response) → verdict. */
export const CHECKS = Object.freeze({
  choice(answer, response) {
    const n = answer.options.length;
    if (!isInt(response) || response < 0 || response >= n) return verdict(false, { readable: false, reason: `pick one of the ${n} options` });
    if (response === answer.index) return verdict(true);
    return verdict(false, { reason: answer.reasons[response] || null, rule: answer.rules[response] || null });
  },
  line(answer, response) {
    if (!isInt(response) || response < 1) return verdict(false, { readable: false, reason: 'tap a line' });
    if (answer.accepted.includes(response)) return verdict(true);
    return verdict(false, { reason: answer.explain?.[String(response)] ?? null });
  },
  lines(answer, response) {
    const picked = Array.isArray(response) ? new Set(response) : null;
    if (!picked?.size || ![...picked].every((n) => isInt(n) && n >= 1)) {
      return verdict(false, { readable: false, reason: 'tap one line or more, then submit' });
    }
    const want = sorted(answer.lines);
    const missing = want.filter((n) => !picked.has(n));
    const extra = sorted([...picked].filter((n) => !want.includes(n)));
    if (!missing.length && !extra.length) return verdict(true);
    const said = [...extra, ...missing].map((n) => answer.explain?.[String(n)]).filter((s) => s !== undefined);
    return verdict(false, { missing, extra, reason: said.length ? said[0] : null });
  },
  typed(answer, response) {
    const { read, examples } = SPELLINGS[answer.spelling];
    const got = typeof response === 'string' ? read(response) : null;
    if (got === null) return verdict(false, { readable: false, reason: `write it like ${examples[0]}` });
    if (got === read(answer.value) || (answer.accepted ?? []).some((a) => read(a) === got)) return verdict(true);
    const key = Object.keys(answer.misread ?? {}).find((k) => read(k) === got);
    const m = key === undefined ? null : answer.misread[key];
    return verdict(false, { reason: m?.reason ?? null, rule: m?.rule ?? null });
  },
  axes(answer, response) {
    const rank = answer.dims.length;
    if (!Array.isArray(response) || !response.every((a) => isInt(a) && a >= 0 && a < rank)) {
      return verdict(false, { readable: false, reason: `tap axes of the rank-${rank} shape, then submit` });
    }
    const picked = new Set(response);
    const want = sorted(answer.axes);
    const missing = want.filter((a) => !picked.has(a));
    const extra = sorted([...picked].filter((a) => !want.includes(a)));
    if (!missing.length && !extra.length) return verdict(true);
    const m = answer.misread?.[axesKey(picked)] ?? null;
    return verdict(false, { missing, extra, reason: m?.reason ?? null, rule: m?.rule ?? null });
  },
});

/** Grade a response against an item's answer (`item.answer`); an unknown form throws. */
export function check(answer, response) {
  const grade = CHECKS[answer?.form];
  if (!grade) throw new Error(`unknown answer form ${JSON.stringify(answer?.form)}`);
  return grade(answer, response);
}

/** The right answer as text, the way the page names it in feedback. */
export function answerText(answer) {
  switch (answer.form) {
    case 'choice': return String(answer.options[answer.index]);
    case 'line': return `line ${answer.line}`;
    case 'lines': return `${answer.lines.length === 1 ? 'line' : 'lines'} ${sorted(answer.lines).join(', ')}`;
    case 'typed': return SPELLINGS[answer.spelling].read(answer.value) ?? answer.value;
    case 'axes': return answer.axes.length ? `${answer.axes.length === 1 ? 'axis' : 'axes'} ${sorted(answer.axes).join(', ')}` : 'no axis';
    default: return '';
  }
}
