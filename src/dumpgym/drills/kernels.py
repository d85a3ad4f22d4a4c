"""Which kernel runs a dot: pick the instruction of the GPU or TPU compile that runs one dot_general of the jaxpr.

XLA's GPU compiler turns each dot into a kernel of one of a few kinds: a GEMM fusion it emits with Triton
(a `kCustom` fusion whose backend_config kind is `__triton_gemm` or `__triton_nested_gemm_fusion`), a cuBLAS
call (a `custom-call` to `__cublas$gemm` or `__cublas$lt$matmul`), or, for a dot too small to be worth a
GEMM, multiplies and a reduce folded into a loop or input fusion. The TPU compiler makes a fusion around the
`convolution` (or `dot`) its MXU runs, or folds a small dot into other arithmetic the same way. Each item
shows the computation that launches the kernel (the entry, or a loop's body) and the dot's jaxpr line, and
asks which of the instructions there that run dots runs it (`choice` form). The answer is every instruction of that computation whose body does the dot's
contraction, read from the compiled layer's attribution (`program.compiled`): an instruction credited
with the dot whose opcode can do its arithmetic (`fusions.does_work`), never a bitcast, copy or layout
transpose that only serves it. Where XLA split the contraction (split-K: a GEMM fusion of partial
products, then a reduce fusion summing them), both rows are right. The kernel's kind is the item's
`skill`, so a missed item returns as a sibling of the same kind.
"""
from __future__ import annotations

from dumpgym.drills import drill
from dumpgym.drills._dump_kernels import kernel_choice, unlinked_kernel_items
from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.drills.fusions import PLUMBING, does_work
from dumpgym.drills.item import Item, Lines, Note
from dumpgym.record.schema import CompiledLayer, EqnFact, Instruction, ProgramRecord

LAUNCHES = frozenset({"fusion", "customcall", "dot", "convolution"})  # what runs as a kernel of its own
CONTRACTIONS = frozenset({"dot_general"})
# A computation is asked about only where it launches at least this many kernels: where it launches two,
# knowing that a kernel is a fusion or custom-call row picks the dot's half the time without reading it.
MIN_LAUNCHES = 5
KERNEL_WORDS = {
    "triton-gemm": "a GEMM fusion XLA emitted with Triton",
    "cublas": "a call into cuBLAS",
    "folded": "no GEMM of its own: XLA rewrote it as {ops} inside a {kind} fusion",
    "mxu": "a fusion built around the matrix multiply the MXU runs",
    "custom": "a kernel of its own",
    "other": "a kernel of another kind",
}


def _line_words(hlo: CompiledLayer) -> str:
    """How the item cites a line of this compile: `GPU HLO line`, `TPU HLO line`."""
    return f"{hlo.backend.upper()} HLO line"


def _kernel(c: "_Compile", ins: Instruction, dot: EqnFact) -> tuple[str, str]:
    """(the kernel's kind for the `skill`, the words naming what XLA printed) of a launching instruction, as
    it runs this dot: a dot or convolution inside it makes it a GEMM kernel; without one, the dot was folded
    into it as other arithmetic (an outer product's multiply in another GEMM's prologue is folded too)."""
    listing = c.listing
    if ins.opcode == "customcall":
        target = ins.custom_call_target
        kind = "cublas" if target.startswith("__cublas") else "custom" if c.hlo.backend == "tpu" else "other"
        return kind, f"custom-call to `{target}`"
    if not ins.calls:  # a dot or convolution XLA left unfused: a kernel of its own, neither Triton's nor cuBLAS's
        return "other", f"an unfused `{c.hlo.printed_opcodes.get(ins.opcode, ins.opcode)}`"
    kind = next((f.kind for f in listing.hlo.fusions if f.line == ins.line), ins.opcode)
    backend = ins.backend_kind  # which emitter XLA chose (`__triton_gemm`): the fusion's kind does not say
    doing = c.doing(ins, dot)
    if {i.opcode for i in doing} & {"dot", "convolution"}:
        if backend.startswith("__triton"):
            return "triton-gemm", f"`{kind}` fusion, backend_config kind `{backend}`"
        if c.hlo.backend == "tpu":
            matmul = sorted({i.opcode for i in doing} & {"dot", "convolution"})[0]
            return "mxu", f"a `{kind}` fusion whose body holds the `{matmul}`"
        return "other", f"`{kind}` fusion" + (f", backend_config kind `{backend}`" if backend else "")
    return "folded", ", ".join(dict.fromkeys(f"%{i.name}" for i in doing))


def _ops(c: "_Compile", ins: Instruction, dot: EqnFact) -> str:
    """The opcodes (as printed) that do a folded dot's work inside a fusion: `multiply`, `reduce`."""
    printed = list(dict.fromkeys(c.hlo.printed_opcodes.get(i.opcode, i.opcode) for i in c.doing(ins, dot)))
    return ", ".join(f"`{p}`" for p in printed) or "other arithmetic"


class _Compile:
    """One GPU or TPU layer read for the drill: which computations launch kernels, and what each launch runs."""

    def __init__(self, program: ProgramRecord, hlo: CompiledLayer):
        self.program, self.hlo, self.listing = program, hlo, Listing(hlo)
        fused = {c for i in hlo.instructions if i.calls for c in self.listing.body(i.line)}
        regions = {c for i in hlo.instructions for c in i.to_apply}
        self.launching = {c.name for c in hlo.computations} - fused - regions
        self.by_computation: dict[str, list[Instruction]] = {}
        for i in hlo.instructions:
            self.by_computation.setdefault(i.computation, []).append(i)

    def doing(self, ins: Instruction, dot: EqnFact) -> list[Instruction]:
        """The instructions of a launch's body (or the launch itself) that do this dot's work."""
        body = set(self.listing.body(ins.line)) if ins.calls else {ins.computation}
        found = self.hlo.instructions if ins.calls else [ins]
        return [i for i in found if i.computation in body and i.opcode not in PLUMBING and dot.id in i.computed_eqns
                and does_work(i.opcode, dot.primitive)]

    def work(self, ins: Instruction) -> set[int]:
        """The equations whose work a launching instruction (its body, for a fusion) does."""
        if not ins.calls:
            return {e for e in ins.computed_eqns if does_work(ins.opcode, self.program.eqns[e].primitive)}
        body = set(self.listing.body(ins.line))
        return {e for i in self.hlo.instructions if i.computation in body and i.opcode not in PLUMBING
                for e in i.computed_eqns if does_work(i.opcode, self.program.eqns[e].primitive)}

    def runs(self, dot: EqnFact) -> list[Instruction]:
        """The launching instructions that do this dot's contraction, in print order."""
        return [i for c in self.launching for i in self.by_computation.get(c, ())
                if i.opcode in LAUNCHES and dot.id in self.work(i)]


@drill("kernels", number="12", title="which kernel runs a dot",
       aim="Find the instruction of the GPU or TPU compile that runs a dot_general: a Triton GEMM fusion, a "
           "cuBLAS call, a fusion around the MXU's multiply, or a fusion it was folded into.",
       per_program=4, cap_by=("layer",))
def kernel_items(program: ProgramRecord) -> list[Item]:
    """One item per dot_general and GPU or TPU layer whose contraction one computation's instructions run. Its
    card is the dot's equation and the layer's target (in a dump without a jaxpr, the dot's line before optimisations:
    `_dump_kernels`)."""
    if not program.eqns and program.dump is not None:
        return unlinked_kernel_items(program, LAUNCHES, MIN_LAUNCHES, KERNEL_WORDS)
    return [item for target, hlo in {**program.layers("gpu"), **program.layers("tpu")}.items() if hlo.has_facts
            for item in _layer_items(program, target, hlo)]


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer) -> list[Item]:
    c = _Compile(program, hlo)
    asked: dict[str, list[tuple[EqnFact, list[Instruction], Instruction]]] = {}
    for dot in program.eqns:
        if dot.primitive not in CONTRACTIONS:
            continue
        runs = c.runs(dot)
        if not runs or len({i.computation for i in runs}) > 1:
            continue  # not run here (dead, or done under a loop's other copy), or split over computations
        if sum(i.opcode in LAUNCHES for i in c.by_computation[runs[0].computation]) < MIN_LAUNCHES:
            continue
        main = next((i for i in runs if _kernel(c, i, dot)[0] != "folded"), runs[0])
        asked.setdefault(runs[0].computation, []).append((dot, runs, main))
    items = []
    for dots in asked.values():
        kernels = sorted({main.line: main for _, _, main in dots}.values(), key=lambda i: i.line)
        if len(kernels) < 2:
            continue  # one kernel runs every dot here: knowing a GEMM's name would pick it
        items += [_item(c, target, dot, runs, main, kernels) for dot, runs, main in dots]
    return items


def _item(c: _Compile, target: str, dot: EqnFact, runs: list[Instruction], main: Instruction,
          kernels: list[Instruction]) -> Item:
    computation = runs[0].computation
    first, last = c.listing.computations[computation]
    skill, printed = _kernel(c, main, dot)
    kind = next((f.kind for f in c.hlo.fusions if f.line == main.line), main.opcode)
    where = "the entry computation" if any(x.entry and x.name == computation for x in c.hlo.computations) \
        else f"%{computation}"
    split = [i for i in runs if i is not main]
    cite = _line_words(c.hlo)
    also = (f"; {', '.join('%' + i.name for i in split)} ({cite} {split[0].line}) does part of it too: "
            "XLA split the contraction" if split else "")
    feedback = (f"The `dot_general` on jaxpr line {dot.jaxpr_lines[0]} runs as %{main.name} ({cite} {main.line}), "
                f"{KERNEL_WORDS[skill].format(kind=kind, ops=_ops(c, main, dot))} ({printed}){also}.")
    feedback += _swapped(c, main, dot)
    why = _explain(c, dot, kernels)
    return Item(
        question=(f"Each of these instructions of {where} (its listing is shown) runs one or more of the "
                  f"jaxpr's `dot_general`s. Which runs the one on jaxpr line {dot.jaxpr_lines[0]}?"),
        answer=kernel_choice(kernels, main, why, cite),
        context=(Lines(target, first, last, cut=True, numbered=True), Lines("jaxpr", *dot.jaxpr_lines, numbered=True),
                 Note(which_compile(c.hlo))),
        card=(str(dot.id), target), layer=target, eqn=dot.id, step="launch", skill=skill, primitive="dot_general",
        jaxpr_lines=tuple(dot.jaxpr_lines), feedback=feedback,
        facts={"hlo_line": main.line, "instruction": main.name, "hlo_lines": [first, last],
               "runs": [i.name for i in runs]})


def _swapped(c: _Compile, main: Instruction, dot: EqnFact) -> str:
    """Why the kernel's result is the dot's with its last two axes exchanged (f32[56,40] for an f32[40,56] dot),
    when it is: a reader comparing shapes would otherwise take it for another dot."""
    d = c.listing.definition(main)
    if d is None or len(d.buffers) != 1 or not dot.outputs:
        return ""
    got, want = tuple(d.buffers[0].dims), tuple(dot.outputs[0].shape)
    if len(want) < 2 or want[-1] == want[-2] or got != (*want[:-2], want[-1], want[-2]):
        return ""
    return (f" Its result is {d.buffers[0].plain}, the dot's {dot.outputs[0]} with its last two axes exchanged: "
            "XLA swapped the dot's operands, so the kernel computes the product transposed, (A·B)ᵀ = Bᵀ·Aᵀ, the same "
            "numbers with the output's two axes the other way round.")


def _explain(c: _Compile, dot: EqnFact, kernels: list[Instruction]) -> dict[int, str]:
    """Why each other kernel offered is not it: the dots it runs instead (told by their operands)."""
    eqns = c.program.eqns
    out = {}
    for i in kernels:
        if dot.id in c.work(i):
            continue
        done = sorted((e for e in c.work(i) if eqns[e].primitive in CONTRACTIONS), key=lambda e: eqns[e].jaxpr_lines[0])
        # Those dots' lines are not on screen (the item shows this dot's): they are told by their operands.
        operands = "; ".join(" and ".join(f"`{a}`" for a in eqns[e].input_avals) for e in done)
        out[i.line] = (f"%{i.name} runs {'other `dot_general`s' if len(done) > 1 else 'another `dot_general`'} "
                       f"of the jaxpr (of {operands}), not this one.")
    return out
