"""The table `dumpgym cost` prints: one row per compiled instruction of a layer, then the program's sums
beside XLA's own totals (cost/estimate.py computes every figure; this module only lays them out)."""
from __future__ import annotations

from dumpgym.cost.estimate import LayerCost
from dumpgym.cost.gap import gap as explain_gap
from dumpgym.record.schema import CompiledLayer

_SORTS = {"line": lambda c: c.line, "flops": lambda c: -c.work.flops, "bytes": lambda c: -c.work.bytes,
          "sends": lambda c: -c.work.sends}


def _n(value: float) -> str:
    """A count in engineering form: 17.3M, 820k, 64."""
    for size, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _spaces(amounts: dict[int, int]) -> str:
    """Bytes by memory space: `820k` in HBM alone, `149k+S1:131k` with a VMEM part."""
    parts = [_n(amounts.get(0, 0))] + [f"S{k}:{_n(v)}" for k, v in sorted(amounts.items()) if k and v]
    return "+".join(parts)


def table(cost: LayerCost, layer: CompiledLayer, sort: str = "line", fused: bool = False) -> str:
    """The per-instruction table and the program's sums beside XLA's, as `dumpgym cost` prints them."""
    rows = [c for c in cost.instructions if fused or c.place in ("entry", "control")]
    # each opcode as XLA prints it (`copy-start`, `custom-call`), not the record's key for it
    printed = {i.line: i.printed_opcode or layer.printed_opcodes.get(i.opcode, i.opcode) for i in layer.instructions}
    if sort == "time":
        rows.sort(key=lambda c: -(cost.share(c) or 0.0))
    else:
        rows.sort(key=_SORTS[sort])
    chip = cost.chip
    head = f"{cost.target}: " + (f"{chip.name}, {_n(chip.flops_per_s)}FLOP/s and {_n(chip.hbm_bytes_per_s)}B/s "
                                 f"(ridge {chip.ridge:.0f} FLOP/B)" + (
                                     f", {_n(chip.interconnect_bytes_per_s)}B/s sent on its interconnect"
                                     if chip.interconnect_bytes_per_s else "")
                                 + (f", f32 dots at {_n(chip.f32_flops_per_s)}FLOP/s (TF32, ridge {chip.f32_ridge:.0f} "
                                    "FLOP/B)" if chip.f32_flops_per_s else "")
                                 if chip else "no chip peaks: no roofline time")
    out = [head, f"{'line':>5} {'opcode':<18} {'name':<24} {'runs':>5} {'flops':>7} {'transc':>7} {'read':>13} "
                 f"{'written':>13} {'sends':>6} {'FLOP/B':>7} {'time':>9} {'share':>6} bound"]
    for c in rows:
        moves = c.work.flops or c.work.transcendentals or c.work.hbm_bytes or c.work.sends
        timed = c.work.roofline(chip) if c.place in ("entry", "control") and moves else None
        share = cost.share(c) if timed else None
        intensity = c.work.intensity()
        opcode = printed.get(c.line, c.opcode)
        out.append(f"{c.line:>5} {(opcode if c.place in ('entry', 'control') else '  ' + opcode):<18} "
                   f"{c.name[:24]:<24} {'?' if c.runs is None else c.runs:>5} {_flops(c.work):>7} "
                   f"{_n(c.work.transcendentals):>7} "
                   f"{_spaces(c.work.read):>13} {_spaces(c.work.written):>13} {_n(c.work.sends):>6} "
                   f"{'' if intensity is None else f'{intensity:.3g}':>7} "
                   f"{'unknown' if c.work.unknown else '' if not timed else f'{timed[0] * 1e6:.3g}us':>9} "
                   f"{'' if share is None else f'{share:.0%}':>6} {timed[1] if timed else ''}")
    out.append(_sums(cost, layer))
    return "\n".join(out)


def _flops(work) -> str:
    """FLOPs as a row shows them: `unknown` for a kernel whose cost nothing gives (its bytes still count)."""
    return "unknown" if work.unknown and not work.flops else _n(work.flops) + ("+?" if work.unknown else "")


def _at_least(work) -> str:
    """FLOPs as the sums show them: `at least 1.2M flops, plus 1 kernel of unknown cost` where a kernel's are unknown."""
    if not work.unknown:
        return f"{_n(work.flops)} flops"
    return (f"at least {_n(work.flops)} flops, plus {work.unknown} kernel{'s' if work.unknown > 1 else ''} "
            "of unknown cost")


def gap(cost: LayerCost, layer: CompiledLayer) -> str:
    """Why our roofline time and XLA's `optimal_seconds` differ, in a line of figures; empty where XLA gives none."""
    found = explain_gap(cost, layer)
    return found.line() if found else ""


def _sums(cost: LayerCost, layer: CompiledLayer) -> str:
    """The program's sums (loops at their trip counts, and once each as XLA counts) beside XLA's own totals."""
    xla, memory = cost.xla_cost, cost.xla_memory

    def figure(key: str) -> str:
        return _n(xla[key]) if key in xla else "-"

    lines = [f"sums{' (loop bodies at their trip counts)' if cost.total != cost.once else ''}: "
             f"{_at_least(cost.total)}, {_n(cost.total.transcendentals)} transcendentals, "
             f"{_n(cost.total.bytes)} bytes, {_n(cost.total.sends)} bytes sent per device",
             f"each loop once, as XLA counts: {_at_least(cost.once)}, {_n(cost.once.transcendentals)} "
             f"transcendentals, {_n(cost.once.bytes)} bytes accessed",
             f"XLA's cost_analysis(): {figure('flops')} flops, {figure('transcendentals')} transcendentals, "
             f"{figure('bytes accessed')} bytes accessed" + ("" if xla else " (it gave none for this compile)")]
    if memory:
        lines.append("XLA's memory_analysis(): " + ", ".join(
            f"{k.removesuffix('_size_in_bytes').replace('_', ' ')} {_n(v)}B" for k, v in memory.items()))
    timed = cost.time()
    if timed:
        lines.append(f"roofline: {'at least ' if cost.total.unknown else ''}{timed[0] * 1e6:.3g}us, {timed[1]}-bound"
                     + (f" (XLA's optimal_seconds: {xla['optimal_seconds'] * 1e6:.3g}us)" if "optimal_seconds" in xla
                        else ""))
        if gap(cost, layer):
            lines.append(gap(cost, layer))
    if cost.unknown_trips:
        lines.append("trip count not known (counted once): the whiles on lines "
                     + ", ".join(map(str, cost.unknown_trips)))
    return "\n".join(lines)
