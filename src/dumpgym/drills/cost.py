"""The cost drill: where the time and the bytes of a compiled program go, on a named chip.

Every answer is `dumpgym.cost.estimate`'s, a pure function of the record: each instruction's FLOPs, the HBM bytes it
reads and writes at the layouts XLA chose, the bytes a collective sends, and a roofline time on the chip's
published peaks (`chips.CHIPS`). Four questions (`step`):

- `dominant`: of a few instructions of one computation (its listing is shown, numbered), which takes the
  longest on the chip's roofline (a `choice` of line numbers, in print order; the options are chosen so the
  answer stands at every place among them, and a row's name cannot say it);
- `bound`: is this instruction compute- or memory-bound at the chip's ridge point (a `choice` of the two, in
  that fixed order; asked only in a layer holding both, each right half of its weight);
- `padding`: how many of the HBM bytes an instruction moves are padding its TPU tiles add (`typed` int);
- `sends`: how many bytes each device sends for a collective, from its shapes and replica groups (`typed`).

The last two are in `_cost_bytes.py`.
"""
from __future__ import annotations

from dumpgym.cost.chips import Chip
from dumpgym.cost.estimate import InstructionCost, LayerCost, layer_cost
from dumpgym.drills import drill
from dumpgym.drills._cost_bytes import padding_items, send_items
from dumpgym.drills._tpu import which_compile
from dumpgym.drills.answer import Choice
from dumpgym.drills.item import Item, Lines, Note
from dumpgym.record.schema import CompiledLayer, ProgramRecord

OPTIONS = 4  # instructions offered in one `dominant` question at most
# A row offered beside the answer takes at most this share of its time: a question is read, not a race of
# rounding (two rows whose times differ by a percent would ask for the bytes to the last one).
CLEAR = 0.9
BOUNDS = ("compute-bound", "memory-bound")  # the `bound` options, in this fixed order


def seconds(t: float) -> str:
    """A roofline time in words, to three figures: `12.5 ns`, `3.07 µs`."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:.3g} {unit}"
    return f"{t / 1e-9:.3g} ns"


def peaks(chip: Chip) -> str:
    """A chip's peaks as the questions quote them: `TPU v5e (197 TFLOP/s, 819 GB/s HBM, 200 GB/s interconnect)`; an
    H100's with its f32 dots' TF32 rate."""
    link = f", {chip.interconnect_bytes_per_s / 1e9:g} GB/s interconnect" if chip.interconnect_bytes_per_s else ""
    f32 = f", f32 dots {chip.f32_flops_per_s / 1e12:g} TFLOP/s as TF32" if chip.f32_flops_per_s else ""
    return f"{chip.name} ({chip.flops_per_s / 1e12:g} TFLOP/s{f32}, {chip.hbm_bytes_per_s / 1e9:g} GB/s HBM{link})"


def _work_words(c: InstructionCost, chip: Chip) -> str:
    """One row's cost in a few words: FLOPs, HBM bytes, time: `%fusion.14 (line 77): 17,367,040 FLOPs,
    165,376 HBM bytes, 202 ns`."""
    w = c.work
    sent = f"{w.sends:,} bytes sent, " if w.sends else ""
    return (f"%{c.name} (line {c.line}): {w.flops + w.transcendentals:,} FLOPs, {w.hbm_bytes:,} HBM bytes, {sent}"
            f"{seconds(w.roofline(chip)[0])}")


# --- dominant -----------------------------------------------------------------------------------

def _time(c: InstructionCost, chip: Chip) -> float:
    return c.work.roofline(chip)[0]


def _subset(rows: list[InstructionCost], chip: Chip, rank: int, k: int) -> list[InstructionCost] | None:
    """k rows in print order whose longest, clearly ahead of the others, is the `rank`-th of them: the longest
    row that has `rank` clearly shorter rows before it and k - 1 - rank after, with the longest of those."""
    for top in sorted(rows, key=lambda c: (-_time(c, chip), c.line)):
        limit = CLEAR * _time(top, chip)
        shorter = sorted((c for c in rows if _time(c, chip) <= limit), key=lambda c: (-_time(c, chip), c.line))
        before = [c for c in shorter if c.line < top.line][:rank]
        after = [c for c in shorter if c.line > top.line][:k - 1 - rank]
        if len(before) == rank and len(after) == k - 1 - rank:
            return sorted([*before, top, *after], key=lambda c: c.line)
    return None


def _dominant_items(target: str, hlo: CompiledLayer, costs: LayerCost) -> list[Item]:
    """Per computation a loop or the entry runs, one question per place the answer can take among the
    options: each asks which of k of its rows takes the longest."""
    chip = costs.chip
    by_computation: dict[str, list[InstructionCost]] = {}
    for c in costs.instructions:
        if c.place in ("entry", "control") and _time(c, chip) > 0 and not c.work.unknown:  # a kernel of unknown cost has no time
            by_computation.setdefault(c.computation, []).append(c)
    spans = {c.name: c.lines for c in hlo.computations}
    items = []
    for name, rows in by_computation.items():
        k = min(OPTIONS, len(rows))
        for rank in range(k if k >= 2 else 0):
            chosen = _subset(rows, chip, rank, k)
            if chosen is not None:
                items.append(_dominant_item(target, hlo, chip, name, spans[name], chosen, rank))
    return items


def _dominant_item(target: str, hlo: CompiledLayer, chip: Chip, computation: str, span: tuple[int, int],
                   chosen: list[InstructionCost], rank: int) -> Item:
    top = chosen[rank]
    lines = [str(c.line) for c in chosen]
    listed = ", ".join(lines[:-1]) + f" and {lines[-1]}"
    reasons, rules = [], []
    flops = top.work.flops + top.work.transcendentals
    for c in chosen:
        more_flops = c.work.flops + c.work.transcendentals > flops
        reasons.append("" if c is top else f"{_work_words(c, chip)}; line {top.line} takes {seconds(_time(top, chip))}"
                       + (": fewer FLOPs, but the bytes decide" if more_flops else ""))
        rules.append("" if c is top else "flops-not-time" if more_flops else "shorter")
    w = top.work
    intensity = f"{flops / w.hbm_bytes:.3g} FLOP/B" if w.hbm_bytes else "no HBM bytes"
    feedback = (f"{_work_words(top, chip)} ({intensity}, {w.roofline(chip)[1]}-bound): the longest of the "
                f"{len(chosen)}.")
    where = "the entry computation" if computation == next(c.name for c in hlo.computations if c.entry) \
        else f"%{computation}"
    return Item(
        question=(f"Which of lines {listed} of {where} (numbered) takes the longest on {peaks(chip)} by the "
                  "roofline: the longest of its FLOPs at the peak, its HBM bytes at their layouts over the bandwidth "
                  "and the bytes it sends over the interconnect's?"),
        answer=Choice(tuple(f"line {n}" for n in lines), rank, tuple(reasons), tuple(rules)),
        context=(Lines(target, span[0], span[1], cut=True, numbered=True), Note(which_compile(hlo))),
        card=("dominant", computation, str(rank), target), layer=target, step="dominant", feedback=feedback,
        facts={"hlo_line": top.line, "instruction": top.name, "option_names": [c.name for c in chosen]})


# --- bound --------------------------------------------------------------------------------------

def _bound_items(target: str, hlo: CompiledLayer, costs: LayerCost) -> list[Item]:
    """Every row outside fusions that does FLOPs and moves HBM bytes, where the layer holds rows of both
    bounds: each bound's rows share half the layer's weight, so neither answer is the habit that pays."""
    chip = costs.chip
    # a row bound by its bytes sent, or a kernel of unknown cost, is asked about by neither side of the ridge
    rows = [c for c in costs.instructions if c.place in ("entry", "control") and c.work.flops and c.work.hbm_bytes
            and not c.work.unknown and c.work.roofline(chip)[1] != "interconnect"]
    by_bound: dict[str, list[InstructionCost]] = {b: [] for b in BOUNDS}
    for c in rows:
        by_bound[f"{c.work.roofline(chip)[1]}-bound"].append(c)
    if not all(by_bound.values()):
        return []
    n = min(len(v) for v in by_bound.values())
    return [_bound_item(target, hlo, chip, c, bound, round(n / len(found), 3))
            for bound, found in by_bound.items() for c in found]


def _bound_item(target: str, hlo: CompiledLayer, chip: Chip, c: InstructionCost, bound: str, weight: float) -> Item:
    index = BOUNDS.index(bound)
    w = c.work
    intensity = (w.flops + w.transcendentals) / w.hbm_bytes
    side = "above" if index == 0 else "below"
    ridge = w.ridge(chip)  # the chip's, or its f32 dots' own (TF32 on an H100)
    whose = f"{chip.name}'s ridge" if abs(ridge - chip.ridge) <= 1e-9 * chip.ridge else "the ridge of its work"
    why = (f"%{c.name} does {w.flops + w.transcendentals:,} FLOPs on {w.hbm_bytes:,} HBM bytes: {intensity:.3g} "
           f"FLOP/B, {side} {whose} of {ridge:.0f} FLOP/B ({peaks(chip)})")
    other = BOUNDS[1 - index]  # the option a miss picks: its reason says what that reading needs, the feedback why not
    wrong = (f"{other} would need {'more' if other == BOUNDS[0] else 'fewer'} FLOPs per HBM byte than the ridge's "
             f"{ridge:.0f}")
    return Item(
        question=(f"Is %{c.name} (line {c.line}) compute-bound or memory-bound on {peaks(chip)}, counting the HBM "
                  "bytes it reads and writes at the layouts XLA chose?"),
        answer=Choice(BOUNDS, index, tuple("" if k == index else wrong for k in range(2)),
                      tuple("" if k == index else "wrong-side-of-ridge" for k in range(2))),
        context=(Lines(target, c.line, c.line, cut=True, numbered=True), Note(which_compile(hlo))),
        card=("bound", c.name, target), layer=target, step="bound", weight=weight, feedback=why + ".",
        facts={"hlo_line": c.line, "instruction": c.name, "intensity": intensity, "ridge": ridge})


# --- the kind -----------------------------------------------------------------------------------

@drill("cost", number="13", title="where the time goes",
       aim="Read a compiled program's costs on a named chip: which instruction takes the longest, whether it is "
           "compute- or memory-bound, the bytes its tiles waste, and what a collective sends.",
       per_program=4, cap_by=("layer", "step"))
def cost_items(program: ProgramRecord) -> list[Item]:
    """Per compiled layer with the facts its cost needs: `dominant` and `bound` where its chip is known (a TPU,
    a GPU), `padding` on a TPU, `sends` everywhere. Cards name the step, the computation or instruction (and
    for `dominant`, the answer's place) and the layer's target."""
    items = []
    for target, hlo in program.compiled.items():
        if not hlo.has_facts:
            continue
        costs = layer_cost(hlo, target)
        if costs.chip is not None:
            items += _dominant_items(target, hlo, costs) + _bound_items(target, hlo, costs)
        items += padding_items(target, hlo, costs) + send_items(target, hlo, costs)
    return items
