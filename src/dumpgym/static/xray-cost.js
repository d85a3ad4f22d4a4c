// What each compiled instruction costs, as the x-ray shows it: its share of the program's estimated
// time beside its line, a table of the instructions to sort by cost, and the top instruction's bound
// in words. Every figure is cost/estimate.py's, computed at build time (data/cost/TARGET/SLUG.json,
// "dumpgym.cost/1", cost/view.py) and fetched with the layer's listing; this module formats and lays out.
import { html, plural, render } from './html.js';
import { getJSON } from './data.js';

const PREFIXES = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
const TIMES = [[1, 's'], [1e-3, 'ms'], [1e-6, 'µs'], [1e-9, 'ns']];
// A share at least this large is a hot line: its gutter figure is set bold.
const HOT = 0.1;

/** The URL of one program's costs on a compile target id (`tpu`, `gpu`, `cpu`, ...). */
export const costURL = (slug, target) => `data/cost/${encodeURIComponent(target)}/${encodeURIComponent(slug)}.json`;

/** A layer's costs for a compile target id, fetched once; a failed fetch becomes its reason (`error`). */
export async function layerCost(slug, target) {
  try {
    return await getJSON(costURL(slug, target));
  } catch (e) {
    return { error: e.message, rows: [], chip: null, top: null };
  }
}

/** Three significant figures, with an SI prefix: 17.3 MFLOP, 165 kB, 64 B. */
export function si(value, unit) {
  for (const [size, prefix] of PREFIXES) {
    if (Math.abs(value) >= size) return `${Number((value / size).toPrecision(3))} ${prefix}${unit}`.trimEnd();
  }
  return `${Number(value.toPrecision(3))} ${unit}`.trimEnd();
}

/** A duration in the unit that reads best: 0.362 µs is 362 ns. */
export function duration(seconds) {
  for (const [size, unit] of TIMES) if (seconds >= size) return `${Number((seconds / size).toPrecision(3))} ${unit}`;
  return `${Number((seconds * 1e12).toPrecision(3))} ps`;
}

/** A share as a line's gutter shows it: 56%, 4.2%, <0.1%, and nothing for none. */
export function shareText(share) {
  if (!share) return '';
  if (share < 0.001) return '<0.1%';
  if (share < HOT) return `${(share * 100).toFixed(1)}%`;
  return `${Math.round(share * 100)}%`;
}

/** A number as shown, with its exact value kept machine-readable (`<data value>`), named by `fact`. */
const fact = (name, value, shown) => html`<data value="${value}" data-cost-fact="${name}">${shown}</data>`;

/** Set each compiled line's share of the estimated time in its gutter (`data-share`); hot lines bold. */
export function markShares(rows, cost) {
  if (!cost?.chip) return;
  for (const r of cost.rows) {
    const row = rows[r.line - 1];
    const text = shareText(r.share);
    if (!row || !text) continue;
    row.dataset.share = text;
    if (r.share >= HOT) row.classList.add('hot');
  }
}

/** What the status line adds for a compiled line that costs something: share, bound and figures. */
export function costNote(cost, n) {
  const r = cost?.rows?.find((row) => row.line === n);
  if (!r) return '';
  const share = r.share ? `${shareText(r.share)} of the estimated time, ${r.bound}-bound · ` : '';
  return html` · <span class="cost-note" data-xray-line-cost>${share}${flopsText(r, 'FLOP')} · ${si(r.hbm_bytes, 'B')} HBM${
    r.sends ? ` · ${si(r.sends, 'B')} sent` : ''}${
    r.runs === 1 ? '' : ` · runs ${r.runs ?? 'an unknown number of'} times`}</span>`;
}

/** A row's FLOPs as shown: "unknown" for a kernel whose cost nothing gives (no cost estimate), never a silent 0. */
export function flopsText(r, unit) {
  if (r.unknown && !r.flops) return 'unknown';
  return `${si(r.flops, unit)}${r.unknown ? ' + unknown' : ''}`;
}

/** The top instruction's bound in words, with the figures it rests on and the chip's ridge point. */
export function boundSentence(cost) {
  const r = cost.rows.find((row) => row.line === cost.top);
  if (!r) return '';
  const chip = cost.chip;
  const runs = r.runs === 1 ? '' : html`, in a loop body that runs ${r.runs ?? 'an unknown number of'} times; the figures are one run's`;
  const work = html`${fact('flops', r.flops, si(r.flops, 'FLOP'))}${r.transcendentals
    ? html` and ${fact('transcendentals', r.transcendentals, `${si(r.transcendentals, '')} transcendentals`)}` : ''}`;
  // an f32 dot's own ridge where the chip runs those at a rate of its own (an H100's TF32)
  const own = r.ridge != null && chip.f32_flops_per_s && Math.abs(r.ridge - chip.ridge) > 1e-9 * chip.ridge;
  const ridgeAt = own ? r.ridge : chip.ridge;
  const ridge = own
    ? html`the ridge point of its work on ${chip.name}, its f32 dots at ${si(chip.f32_flops_per_s, 'FLOP/s')} (<span title="${
      chip.f32_source}">TF32</span>), ${fact('ridge', ridgeAt, `${Number(ridgeAt.toPrecision(3))} FLOP/B`)}`
    : html`${chip.name}'s ridge point of ${fact('ridge', chip.ridge, `${Number(chip.ridge.toPrecision(3))} FLOP/B`)} (${
      si(chip.flops_per_s, 'FLOP/s')} ÷ ${si(chip.hbm_bytes_per_s, 'B/s')})`;
  const compute = r.bound === 'compute';
  if (r.bound === 'interconnect') {
    return html`<p class="bound" data-xray-bound>The top instruction, <code>%${r.name}</code> (${r.opcode}, HLO ${r.line}${runs}), takes ${
      fact('share', r.share, shareText(r.share))} of the estimated time and is <strong>interconnect-bound</strong>: each device sends ${
      fact('sends', r.sends, si(r.sends, 'B'))} to the others, which at ${si(chip.interconnect_bytes_per_s, 'B/s')} (<span title="${
      chip.interconnect_source}">${chip.name}'s published interconnect figure</span>) takes longer than its FLOPs and its HBM bytes.</p>`;
  }
  const idle = !r.flops && !r.transcendentals;  // a copy: bytes alone
  const rests = idle && r.hbm_bytes
    ? html`it computes nothing and moves ${fact('hbm_bytes', r.hbm_bytes, si(r.hbm_bytes, 'B'))} of HBM traffic: ${
      fact('per_byte', r.per_byte, '0 FLOP/B')}, below ${ridge}`
    : r.hbm_bytes
    ? html`${work} over ${fact('hbm_bytes', r.hbm_bytes, si(r.hbm_bytes, 'B'))} of HBM traffic is ${
      fact('per_byte', r.per_byte, `${Number(r.per_byte.toPrecision(3))} FLOP/B`)}${
      r.transcendentals ? ' (a transcendental counted as a FLOP, as the roofline counts it)' : ''}, ${
      compute ? 'above' : 'below'} ${ridge}`
    : html`${work} and no HBM traffic`;
  const why = idle ? 'a data move takes only the time of its bytes'
    : compute ? 'its arithmetic takes longer than its bytes at the chip\'s peaks'
      : 'its bytes take longer than its arithmetic at the chip\'s peaks';
  return html`<p class="bound" data-xray-bound>The top instruction, <code>%${r.name}</code> (${r.opcode}, HLO ${r.line}${runs}), takes ${
    fact('share', r.share, shareText(r.share))} of the estimated time and is <strong>${r.bound}-bound</strong>: ${rests}; ${why}.</p>`;
}

/** The head of the cost panel: the program's estimated time on its chip, or why there is none. */
function costHead(cost) {
  if (cost.error) return html`<p class="fine" data-xray-cost-note>No costs for this layer: ${cost.error}</p>`;
  const loops = cost.unknown_trips?.length
    ? html` The record gives no trip count for the ${plural(cost.unknown_trips.length, 'while')} on HLO ${cost.unknown_trips.join(', ')}: their bodies count once.` : '';
  if (!cost.chip) {
    const why = cost.backend === 'cpu'
      ? " for the CPU: a host CPU's peaks depend on the machine XLA compiled for, so the gym's cost model gives it no roofline"
      : `: the gym's cost model has no published peaks for ${cost.device_kind ? `the device kind "${cost.device_kind}"` : 'this layer\'s device'} (docs/cost.md names the chips it times)`;
    return html`<p class="fine" data-xray-cost-note>No time and no shares${why}. The table gives each instruction's FLOPs and bytes.${loops}</p>`;
  }
  const chip = cost.chip;
  const link = chip.interconnect_bytes_per_s
    ? html`, <span title="${chip.interconnect_source}">${si(chip.interconnect_bytes_per_s, 'B/s')} sent on its interconnect</span>` : '';
  const unknown = cost.unknown_kernels
    ? html` At least: ${plural(cost.unknown_kernels, 'kernel')} of unknown cost (no cost estimate) ${cost.unknown_kernels > 1 ? 'count only their' : 'counts only its'} bytes.` : '';
  const gap = cost.gap ? html` <span data-xray-cost-gap>${cost.gap}.</span>` : '';
  return html`<p class="fine" data-xray-cost-head>Estimated time ${cost.unknown_kernels ? 'at least ' : ''}${fact('seconds', cost.seconds, duration(cost.seconds))}: each instruction's roofline time (the longest of its FLOPs, HBM bytes and bytes sent) on <span title="${chip.source}">${chip.name}'s peaks (${
    si(chip.flops_per_s, 'FLOP/s')}, ${si(chip.hbm_bytes_per_s, 'B/s')} HBM)</span>${link}, summed; a bound, not a measurement. The figure beside each compiled line is its share.${unknown}${loops}${gap}</p>`;
}

const SORTS = {
  line: (a, b) => a.line - b.line,
  time: (a, b) => (b.share ?? 0) - (a.share ?? 0) || a.line - b.line,
  flops: (a, b) => b.flops - a.flops || b.transcendentals - a.transcendentals || a.line - b.line,
  bytes: (a, b) => b.hbm_bytes - a.hbm_bytes || b.bytes - a.bytes || a.line - b.line,
  sends: (a, b) => b.sends - a.sends || a.line - b.line,
};
const SORT_NAMES = { line: 'line', time: 'cost (share of time)', flops: 'FLOPs', bytes: 'HBM bytes', sends: 'bytes sent' };

/** The sorts a layer offers: by line, by cost where it has a chip, by FLOPs, by bytes, by bytes sent where any are. */
const sortsOf = (cost) => Object.keys(SORTS).filter((k) => (k !== 'time' || cost.chip) && (k !== 'sends' || sent(cost)));

/** Whether a layer's collectives send anything (then the table has a column of bytes sent). */
const sent = (cost) => cost.rows.some((r) => r.sends);

/** The table's rows, sorted by `sort` ("line", "time", "flops", "bytes"). */
function costTableRows(cost, sort) {
  const timed = Boolean(cost.chip);
  const loops = cost.rows.some((r) => r.runs !== 1);
  const intensity = (r) => (r.intensity === null ? '—' : Number(r.intensity.toPrecision(3)));
  return html`${[...cost.rows].sort(SORTS[sort] ?? SORTS.line).map((r) => html`<tr data-cost-line="${r.line}"${
    r.line === cost.top ? html` class="lead"` : ''}>${timed ? html`<td class="fig" data-cost-share>${r.unknown ? 'unknown' : shareText(r.share) || '0%'}</td>` : ''}<td><button type="button" data-cost-line="${r.line}" aria-label="HLO line ${r.line}: show it in the listing">HLO ${r.line}</button></td><td><code>%${r.name}</code></td><td>${r.opcode}</td>${
    loops ? html`<td class="fig">${r.runs ?? '?'}</td>` : ''}<td class="fig"${r.unknown ? html` data-cost-unknown` : ''}>${flopsText(r, '')}</td><td class="fig">${si(r.hbm_bytes, 'B')}</td>${
    sent(cost) ? html`<td class="fig">${si(r.sends, 'B')}</td>` : ''}<td class="fig">${intensity(r)}</td>${
    timed ? html`<td>${r.bound}</td>` : ''}</tr>`)}`;
}

/** Sort the table of a cost panel inside `holder` by `sort` and mark its pressed button; false without one. */
export function sortCostTable(holder, cost, sort) {
  const body = holder.querySelector('[data-cost-rows]');
  if (!body) return false;
  render(body, costTableRows(cost, sort));
  for (const b of holder.querySelectorAll('[data-cost-sort]')) b.setAttribute('aria-pressed', String(b.dataset.costSort === sort));
  return true;
}

/** The cost panel under the compiled column: its head, the top instruction's bound, and the sortable table. */
export function costPanel(cost, sort) {
  if (!cost) return '';
  if (cost.error || !cost.rows.length) return html`<div class="costs" data-xray-cost>${costHead(cost)}</div>`;
  const sorts = sortsOf(cost);
  const on = sorts.includes(sort) ? sort : 'line';
  const timed = Boolean(cost.chip);
  const loops = cost.rows.some((r) => r.runs !== 1);
  const idle = cost.idle ? html` · ${plural(cost.idle, 'instruction')} that compute and move nothing (parameters, bitcasts, get-tuple-elements) left out` : '';
  return html`<div class="costs" data-xray-cost>${costHead(cost)}${cost.chip ? boundSentence(cost) : ''}
    <p class="sorts"><span role="group" aria-label="sort the instructions by">sort ${plural(cost.rows.length, 'instruction')} by ${sorts.map((k) => html`<button type="button" data-cost-sort="${k}" aria-pressed="${String(k === on)}">${SORT_NAMES[k]}</button>`)}</span><span class="fine">outside fusions${idle}</span></p>
    <div class="cost-table"><table><thead><tr>${timed ? html`<th scope="col">share</th>` : ''}<th scope="col">line</th><th scope="col">instruction</th><th scope="col">opcode</th>${
    loops ? html`<th scope="col">runs</th>` : ''}<th scope="col" title="FLOPs, one run (transcendentals apart, as XLA counts them)">FLOPs</th><th scope="col" title="bytes read and written in HBM (memory space 0), one run">HBM bytes</th>${
    sent(cost) ? html`<th scope="col" title="bytes each device sends to the others (collectives), one run">sent</th>` : ''}<th scope="col" title="FLOPs per HBM byte">FLOP/B</th>${
    timed ? html`<th scope="col">bound</th>` : ''}</tr></thead><tbody data-cost-rows>${costTableRows(cost, on)}</tbody></table></div></div>`;
}
