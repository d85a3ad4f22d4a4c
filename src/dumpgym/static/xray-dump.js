// A dump's module in the x-ray: what only the dump says of it (its record's `dump`, record/schema.py
// `DumpFacts`: the files read, what could not be read, the links in words, XLA's buffers), and for a module
// dumped without JAX's layers, the x-ray of the layers it has: the source lines its stack frames name, the
// HLO before optimisations and the optimised HLO, a source line lighting the instructions that name it.
// The page only shows what the record says: every text goes through `html`, which escapes it.
import { html, plural } from './html.js';
import { listing } from './data.js';

/** Whether a program is a dump's module whose x-ray is its source lines and XLA's two layers. */
export function sourceXray(record) {
  return Boolean(record.dump && !record.stablehlo && record.dump.source_lines?.length);
}

/** The columns of a source x-ray, fetched: the source rows and the HLO before optimisations (highlighted
 * at build time like every listing). */
export function sourceListings(slug) {
  return Promise.all(['dump_source', 'hlo_before'].map((layer) => listing(slug, layer)));
}

/** The program as the x-ray indexes it, for a source x-ray: one group per source line, its row in the first
 * column, the instructions before optimisations that name it in the second, the optimised ones in the third. */
export function sourceProgram(program) {
  const lines = program.dump.source_lines;
  const rows = program.dump.source.split('\n');
  // A fusion absorbed the source lines that light it: the fusion list names them as a traced program's equations.
  const fusions = (program.hlo?.fusions ?? []).map((f) => ({
    ...f, eqns: lines.flatMap((s, i) => (s.hlo.includes(f.line) ? [i] : [])) }));
  return {
    ...program,
    xray: lines.map((s, i) => ({ eqn: i, jaxpr_lines: [s.row], stablehlo_lines: s.before })),
    // Each source line's "primitive" is its place, `file:line`, as its row starts.
    eqns: lines.map((s, i) => ({ id: i, parent: null, primitive: rows[s.row - 1].split('  ')[0], jaxpr_lines: [s.row, s.row] })),
    stablehlo_ops: [],
    lowered_to_nothing: [],
    hlo: program.hlo && { ...program.hlo, fusions,
                          lines_by_eqn: Object.fromEntries(lines.map((s, i) => [String(i), s.hlo])) },
  };
}

/** The layer names of a source x-ray's columns, as the status line and the tabs say them. */
export const SOURCE_NAMES = { jaxpr: 'source', stablehlo: 'HLO before', hlo: 'HLO' };

/** Why a line of a source x-ray lights nothing. */
export function whySourceDim(layer, text) {
  if (!text.trim()) return 'an empty line';
  if (layer === 'stablehlo') return "no stack frame of this instruction names a source line (XLA's own, a parameter, a header)";
  return 'no instruction names this source line';
}

function bytes(n) {
  if (n === null || n === undefined) return '—';
  for (const [unit, size] of [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]]) {
    if (n >= size) return `${(n / size).toFixed(1)} ${unit}`;
  }
  return `${n} B`;
}

function buffers(b) {
  if (!b) return html`<p class="fine">XLA wrote no buffer assignment for this module.</p>`;
  const kinds = ['parameter', 'output', 'temp', 'constant'].map((k) => `${k} ${bytes(b.bytes_by_kind[k])}`).join(' · ');
  const live = Object.entries(b.live_at_peak ?? {});
  const peak = b.peak_bytes === null || b.peak_bytes === undefined ? '' : html`<p data-dump-peak>peak (XLA's live-range report):
    <b>${bytes(b.peak_bytes)}</b> live at once, while the schedule runs <code>${b.peak_at || '?'}</code>${
    live.length ? html`; live then: ${live.map(([name, n], i) => html`${i ? ', ' : ''}<code>${name}</code> ${bytes(n)}`)}` : ''}</p>`;
  const more = b.allocation_count - b.allocations.length;
  return html`${peak}<p>buffer assignment: ${kinds}${b.total_bytes === null || b.total_bytes === undefined ? ''
    : ` · memory-usage report, total ${bytes(b.total_bytes)}`} · ${plural(b.allocation_count, 'allocation')}, ${bytes(b.allocated_bytes)} in all</p>
    <div class="table-wrap"><table class="dump-buffers"><thead><tr><th>allocation</th><th>size</th><th>holds</th><th>largest value</th></tr></thead>
    <tbody>${b.allocations.map((a) => html`<tr><td>${a.number}</td><td>${bytes(a.bytes)}</td><td>${a.kind}</td><td><code>${a.value}</code></td></tr>`)}</tbody></table></div>
    ${more > 0 ? html`<p class="fine">and ${plural(more, 'smaller allocation')}</p>` : ''}`;
}

/** The panel under the x-ray for a dump's module (empty for a traced program). */
export function dumpPanel(record) {
  const d = record.dump;
  if (!d) return null;
  const before = d.hlo_before && !sourceXray(record)
    ? html`<details data-dump-before><summary>HLO before optimisations (${plural(d.hlo_before.split('\n').length, 'line')})</summary><pre class="ls">${d.hlo_before}</pre></details>` : '';
  const files = Object.entries(d.source_files ?? {});
  return html`<h3>from the dump</h3>
    <p data-dump-module>module <code><bdi>${d.module}</bdi></code> · ${d.target || 'target not named'} · read from ${d.folders.map((f, i) => html`${i ? ', ' : ''}<bdi>${f}</bdi>`)}</p>
    ${d.notes.length ? html`<ul class="dump-notes" data-dump-notes>${d.notes.map((n) => html`<li><bdi>${n}</bdi></li>`)}</ul>` : ''}
    ${d.counts.length ? html`<p class="fine" data-dump-counts>${d.counts.join(' · ')}</p>` : ''}
    ${files.length ? html`<p class="fine">source files: ${files.map(([f, here], i) => html`${i ? ', ' : ''}<bdi>${f}</bdi> (${here ? 'here' : 'not on this machine'})`)}</p>` : ''}
    <h4>buffers</h4>${buffers(d.buffers)}
    ${before}
    <details data-dump-files><summary>${plural(d.files.length, 'file')} read</summary><ul>${d.files.map((f) => html`<li>${f.layer}: <bdi>${f.path}</bdi> (${bytes(f.bytes)})</li>`)}</ul></details>`;
}
