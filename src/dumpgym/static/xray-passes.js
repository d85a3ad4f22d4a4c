// The pass that made a compiled instruction, for a program read from a dump with XLA's per-pass files
// (`--xla_dump_hlo_pass_re`): its compiled layer's `passes` (record/schema.py `PassHistory`) holds, per
// instruction line, the first dump that prints it, the dumps that changed it after, and the texts around it.
// The page only shows what the record says: every text goes through `html`, which escapes it.
import { html, plural } from './html.js';

/** The origins of a compiled layer's instructions by line (a layer without per-pass dumps: none). */
export function indexPasses(hlo) {
  return new Map((hlo?.passes?.origins ?? []).map((o) => [o.line, o]));
}

/** A dump as a pass: "pass fusion (pipeline HLO_passes_after_layout_assignment)", a step inside a pass, or a
 * pipeline's start. */
function passWords(d) {
  if (d.during) return html`pass <code>${d.after}</code> (its step <code>${d.during}</code>)`;
  if (d.after === 'pipeline-start') return html`the start of pipeline <code>${d.pipeline}</code>`;
  return html`pass <code>${d.after}</code> (pipeline <code>${d.pipeline}</code>)`;
}

function made(passes, o) {
  const d = passes.dumps[o.made];
  if (o.made === 0) return html`in the module as the first pass dump prints it (${passWords(d)}): no pass it records made it`;
  if (o.exact) return html`made by ${passWords(d)}`;
  const prev = passes.dumps[o.made - 1];
  if (d.after === 'pipeline-start') {
    return html`first printed at ${passWords(d)}: made after the dump before (after ${passWords(prev)}), by something XLA does not dump per pass`;
  }
  return html`first printed after ${passWords(d)}: made by it or by a pass since the dump before (after ${passWords(prev)}) that the dump leaves out`;
}

function snippet(label, lines, which) {
  return lines.length
    ? html`<figure data-xray-pass-${which}><figcaption>${label}</figcaption><pre>${lines.join('\n')}</pre></figure>`
    : '';
}

/** What the per-pass dumps say of compiled line `n`: the pass that made it, the ones that changed it after, and
 * before / after texts; null where the layer has no per-pass dumps or the line is no instruction. */
export function passPanel(hlo, origins, n, ins) {
  const passes = hlo?.passes;
  if (!passes) return null;
  const o = origins.get(n);
  const name = ins?.name;
  if (!o) {
    if (!name) return null;
    const last = passes.dumps[passes.dumps.length - 1];
    return html`<p><code>%${name}</code>: no per-pass dump prints it (made after the last, ${last ? passWords(last) : 'none'}, or by a pass the pattern <code>${passes.pass_re || '?'}</code> leaves out)</p>`;
  }
  // The record leaves out what is empty: no later change, no texts, no note.
  const later = o.changed ?? [];
  const changed = later.length
    ? html`<p data-xray-pass-changed>changed after by ${later.map((k, i) => html`${i ? ', ' : ''}${passWords(passes.dumps[k])}`)}</p>` : '';
  // An instruction with no texts and no note was made with its computation (a new fusion's body): its fusion has them.
  const note = o.note ?? (o.made && !o.before && !o.after ? `made with its computation %${ins?.computation}, new in this dump` : '');
  return html`<p data-xray-pass-made>${made(passes, o)}${note ? html` · <span class="fine">${note}</span>` : ''}</p>
    ${snippet(`before (dump ${passes.dumps[Math.max(0, o.made - 1)].step})`, o.before ?? [], 'before')}
    ${snippet(`after (dump ${passes.dumps[o.made].step})`, o.after ?? [], 'after')}${changed}`;
}

/** "3 instructions made by 2 passes", for the compiled layer's note. */
export function passesNote(hlo) {
  const passes = hlo?.passes;
  if (!passes) return '';
  const by = new Set(passes.origins.filter((o) => o.made > 0).map((o) => o.made));
  return ` · per-pass dumps: ${plural(passes.dumps.length, 'dump')}, ${plural(by.size, 'pass', 'passes')} made its instructions`;
}
