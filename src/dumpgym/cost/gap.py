"""Why the roofline of a program's sums and XLA's own `optimal_seconds` differ, in figures, where XLA gives one.

XLA's TPU compiler (libtpu) reports an `optimal_seconds` in `cost_analysis()`. On every TPU v5e compile the gym has
made, it is the module's `bytes accessed` at one fixed rate, `XLA_TPU_BYTES_PER_S` (about 738 GB/s, not the 819 GB/s
Google publishes): no FLOP term, no interconnect term. The gap to ours is then made of named parts: XLA's bytes
against ours (our HBM bytes, our bytes in other memory spaces, which ours does not time, and what libtpu counts
beyond ours, the operands it reads in several passes), its rate against the published one, and our FLOP and
interconnect terms where one of them is the longest. A FLOP count that differs from XLA's is pinned to the
instructions a stated rule names (`pinned`), or said to be pinned to none.

A pure function of a `LayerCost` and the compiled layer it was counted from; docs/cost.md states each rule.
"""
from __future__ import annotations

from dataclasses import dataclass

from dumpgym.cost.estimate import LayerCost
from dumpgym.record.schema import CompiledLayer, Instruction

# libtpu's optimal_seconds over its bytes accessed, the same on every TPU v5e compile of the built-in corpus (to
# six figures) and on fresh compiles of other shapes (tests/test_cost_gap.py): the rate its model moves bytes at.
XLA_TPU_BYTES_PER_S = 737.6605e9
_SAME_RATE = 1e-4  # a layer whose own ratio is this close to it is taken to follow the rule

# Custom calls a TPU gather fusion holds around the gather, whose index unpacking (ands and shifts) XLA's rules
# count as elementwise FLOPs and libtpu does not.
_GATHER_HELPERS = frozenset({"GatherScatterIndicesBitpacked"})


@dataclass(frozen=True)
class Pinned:
    """Instructions a FLOP gap is pinned to, by which rule, and the FLOPs ours counts in them."""

    lines: tuple[int, ...]
    rule: str  # "reduce-window" or "gather-indices"
    flops: int


@dataclass(frozen=True)
class Gap:
    """The figures that set our roofline and XLA's `optimal_seconds` apart, for one TPU layer."""

    xla_seconds: float
    ours_seconds: float
    ours_bound: str
    xla_bytes: int
    xla_rate: float | None  # XLA_TPU_BYTES_PER_S where the layer follows that rule, else None (XLA's own model)
    hbm_bytes: int  # ours, each loop once as XLA counts
    other_bytes: int  # ours in memory spaces other than HBM (VMEM), each loop once: ours does not time them
    beyond: int  # XLA's bytes accessed less all of ours: what libtpu counts beyond ours (negative: fewer)
    flops_gap: int  # XLA's FLOPs less ours (each loop once)
    pinned: Pinned | None
    sends: int  # bytes each device sends, loops at their trip counts: no part of XLA's figure

    def line(self) -> str:
        """The gap in one sentence, as `dumpgym cost` and the page print it."""
        ratio = self.xla_seconds / self.ours_seconds
        head = (f"why they differ: XLA's optimal_seconds ({_us(self.xla_seconds)}) is {ratio:.3g}x our roofline "
                f"({_us(self.ours_seconds)}, {self.ours_bound}-bound)")
        if self.xla_rate is None:
            return head + "; XLA's figure is its own model of each op, which it does not break down"
        parts = [f"{head}; it is XLA's {_n(self.xla_bytes)} bytes accessed at {self.xla_rate / 1e9:.0f} GB/s "
                 f"(libtpu's own rate; the published HBM figure ours uses is higher), with no FLOP or interconnect "
                 f"term. Of those bytes, {_n(self.hbm_bytes)} are our HBM bytes, {_n(self.other_bytes)} our VMEM "
                 "bytes (which ours does not time)"]
        parts[-1] += (f", and {_n(self.beyond)} more libtpu counts (operands it reads in several passes)"
                      if self.beyond > 0 else f"; libtpu counts {_n(-self.beyond)} fewer than ours"
                      if self.beyond < 0 else "")
        if self.ours_bound == "interconnect":
            parts.append(f"ours is the {_n(self.sends)} bytes each device sends, over the interconnect")
        elif self.ours_bound == "compute":
            parts.append("ours is its FLOPs at the matmul peak")
        if self.flops_gap:
            count = f"XLA counts {_n(abs(self.flops_gap))} FLOPs {'fewer' if self.flops_gap < 0 else 'more'}"
            if self.pinned is None:
                parts.append(count + ", pinned to no one instruction")
            else:
                where = ", ".join(map(str, self.pinned.lines))
                parts.append(count + f", all in line{'s' if len(self.pinned.lines) > 1 else ''} {where} "
                             + _RULES[self.pinned.rule])
        return "; ".join(parts)


_RULES = {
    "reduce-window": "(a reduce-window: XLA's HloCostAnalysis charges window − 1 combines per result, padding "
                     "included, which ours follows; libtpu charges fewer)",
    "gather-indices": "(a gather fusion's index unpacking, ands and shifts ours counts as elementwise FLOPs and "
                      "libtpu does not)",
}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g}us"


def _n(value: float) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def gap(cost: LayerCost, layer: CompiledLayer) -> Gap | None:
    """The gap between our roofline and XLA's `optimal_seconds` for the layer `cost` was counted from, None where
    XLA gives none (a CPU or GPU compile) or ours has no time."""
    timed, xla = cost.time(), cost.xla_cost.get("optimal_seconds")
    if not timed or not xla or not timed[0]:
        return None
    xla_bytes = int(cost.xla_cost.get("bytes accessed", 0))
    rate = xla_bytes / xla if xla_bytes else None
    follows = rate is not None and abs(rate / XLA_TPU_BYTES_PER_S - 1) < _SAME_RATE
    once = cost.once
    flops_gap = int(cost.xla_cost.get("flops", 0)) - once.flops
    return Gap(xla, timed[0], timed[1], xla_bytes, XLA_TPU_BYTES_PER_S if follows else None, once.hbm_bytes,
               once.bytes - once.hbm_bytes, xla_bytes - once.bytes, flops_gap,
               pin(cost, layer, flops_gap) if flops_gap else None, cost.total.sends)


def pin(cost: LayerCost, layer: CompiledLayer, flops_gap: int) -> Pinned | None:
    """The instructions a FLOP gap lies in, by the first rule it fits, else None. XLA counting fewer:
    - `gather-indices`: the elementwise FLOPs inside the gather fusions (those holding a call in `_GATHER_HELPERS`)
      are the whole gap;
    - `reduce-window`: the gap is no more than the reduce-windows' FLOPs (libtpu charging those fewer)."""
    if flops_gap >= 0:
        return None
    missing = -flops_gap
    by_line = {i.line: i for i in layer.instructions}
    members: dict[str, list[Instruction]] = {}
    for i in layer.instructions:
        members.setdefault(i.computation, []).append(i)
    work = {c.line: c.work for c in cost.instructions}
    gathers = []
    for c in cost.instructions:
        if c.opcode == "fusion" and c.place in ("entry", "control"):
            inside = _inside(by_line[c.line], members)
            if any(i.custom_call_target in _GATHER_HELPERS for i in inside):
                gathers.append((c.line, sum(work[i.line].elementwise for i in inside)))
    if gathers and sum(f for _, f in gathers) == missing:
        return Pinned(tuple(line for line, _ in gathers), "gather-indices", missing)
    windows = [c for c in cost.instructions if c.opcode == "reducewindow"]
    if windows and missing <= sum(c.work.reduction for c in windows):
        places = {c.line: c.place for c in cost.instructions}
        holders = tuple(sorted({_holder(by_line[c.line], layer, places).line for c in windows}))
        return Pinned(holders, "reduce-window", sum(c.work.reduction for c in windows))
    return None


def _inside(fusion: Instruction, members: dict[str, list[Instruction]]) -> list[Instruction]:
    """Every instruction a fusion runs, nested fusions' included."""
    out, todo, seen = [], list(fusion.calls), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            out += members.get(name, ())
            todo += [c for i in members.get(name, ()) for c in i.calls]
    return out


def _holder(ins: Instruction, layer: CompiledLayer, places: dict[int, str]) -> Instruction:
    """The instruction outside fusions that runs `ins` (itself, or the fusion holding it)."""
    while places[ins.line] not in ("entry", "control"):
        ins = next(i for i in layer.instructions if ins.computation in i.calls + i.to_apply)
    return ins
