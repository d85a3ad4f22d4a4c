"""The kernel drill of a dump without a jaxpr: which instruction of the GPU or TPU compile runs a `dot` of XLA's HLO
before optimisations, from the exact links the record keeps (`DumpFacts.before_links`, `dumps/exact.py`).

A dot is asked only where what it became is decided: every optimised `dot`, `convolution` or `custom-call` that its
name stack, frame and opcode allow to have come from it links to it exactly (its line is none of the record's
`before_undecided`), at least one does, and all of those sit in one launching instruction (a fusion's body, or the
instruction itself) of one computation that launches `MIN_LAUNCHES` kernels or more. A matmul's two backward dots
often share their name stack and line: neither is asked then. The options are the kernels that run the asked dots of
that computation, as the jaxpr's kernel drill offers them.
"""
from __future__ import annotations

from dumpgym.drills._tpu import Listing, which_compile
from dumpgym.drills.answer import Choice
from dumpgym.drills.item import Item, Lines, Note
from dumpgym.record.schema import CompiledLayer, DumpDot, Instruction, ProgramRecord

MATMULS = frozenset({"dot", "convolution", "customcall"})  # what a dot before optimisations becomes, linked


def unlinked_kernel_items(program: ProgramRecord, launches: frozenset, least: int, words: dict) -> list[Item]:
    """The kernel items of a dump without a jaxpr, per GPU or TPU layer (`launches`: the opcodes that run as a
    kernel of their own; `least`: the launches a computation must hold to be asked; `words`: each kernel kind's)."""
    dump = program.dump
    if program.eqns or dump is None or not dump.before_links or not dump.dots:
        return []
    return [item for target, hlo in {**program.layers("gpu"), **program.layers("tpu")}.items() if hlo.has_facts
            for item in _layer_items(program, target, hlo, launches, least, words)]


def _launches(hlo: CompiledLayer, listing: Listing, launches: frozenset) -> tuple[dict[int, Instruction], dict]:
    """Each instruction's launch (by line: itself, or the launching instruction whose body holds it), and each
    computation's instructions."""
    fused = {c for i in hlo.instructions if i.calls for c in listing.body(i.line)}
    regions = {c for i in hlo.instructions for c in i.to_apply}
    launching = {c.name for c in hlo.computations} - fused - regions
    held: dict[str, list[Instruction]] = {}
    for i in hlo.instructions:
        held.setdefault(i.computation, []).append(i)
    launch_of: dict[int, Instruction] = {}
    for i in hlo.instructions:
        if i.computation in launching and i.opcode in launches:
            launch_of[i.line] = i
            for c in (listing.body(i.line) if i.calls else ()):
                for member in held.get(c, ()):
                    launch_of[member.line] = i
    return launch_of, held


def _layer_items(program: ProgramRecord, target: str, hlo: CompiledLayer, launches: frozenset, least: int,
                 words: dict) -> list[Item]:
    dump, listing = program.dump, Listing(hlo)
    launch_of, held = _launches(hlo, listing, launches)
    runs: dict[int, list[tuple[Instruction, Instruction | None]]] = {}  # before line -> (matmul, its launch)
    for hlo_line, before in dump.before_links.items():
        ins = listing.at.get(int(hlo_line))
        if ins is not None and ins.opcode in MATMULS:
            runs.setdefault(before, []).append((ins, launch_of.get(ins.line)))
    undecided = set(dump.before_undecided)
    asked: dict[str, list[tuple[DumpDot, Instruction, list[Instruction]]]] = {}
    for dot in dump.dots:
        found = runs.get(dot.line, [])
        if not found or dot.line in undecided or any(launch is None for _, launch in found):
            continue
        if len({launch.line for _, launch in found}) != 1:
            continue  # split over kernels, or run under two loops' copies
        launch = found[0][1]
        if sum(i.opcode in launches for i in held[launch.computation]) < least:
            continue
        asked.setdefault(launch.computation, []).append((dot, launch, [m for m, _ in found]))
    items = []
    for dots in asked.values():
        kernels = sorted({launch.line: launch for _, launch, _ in dots}.values(), key=lambda i: i.line)
        if len(kernels) < 2:
            continue  # one kernel runs every dot here: knowing a GEMM's name would pick it
        ran = {k.line: sorted(d.line for d, launch, _ in dots if launch is k) for k in kernels}
        items += [_item(program, target, hlo, listing, dot, launch, matmuls, kernels, ran, words)
                  for dot, launch, matmuls in dots]
    return items


def kernel_choice(kernels: list[Instruction], right: Instruction, why: dict[int, str], cite: str) -> Choice:
    """The kernels offered (`%NAME (TPU HLO line N)`), the right one, and why each other is not it."""
    return Choice(tuple(f"%{k.name} ({cite} {k.line})" for k in kernels), kernels.index(right),
                  tuple(why.get(k.line, "") for k in kernels), tuple("" if k is right else "another-dot" for k in kernels))


def _kind(hlo: CompiledLayer, launch: Instruction) -> tuple[str, str]:
    """(the kernel's kind, the words naming what XLA printed) of a launch that holds a linked matmul."""
    if launch.opcode == "customcall":
        target = launch.custom_call_target
        return ("cublas" if target.startswith("__cublas") else "custom" if hlo.backend == "tpu" else "other",
                f"custom-call to `{target}`")
    if not launch.calls:
        return "other", f"an unfused `{hlo.printed_opcodes.get(launch.opcode, launch.opcode)}`"
    kind = next((f.kind for f in hlo.fusions if f.line == launch.line), launch.opcode)
    if launch.backend_kind.startswith("__triton"):
        return "triton-gemm", f"`{kind}` fusion, backend_config kind `{launch.backend_kind}`"
    if hlo.backend == "tpu":
        return "mxu", f"a `{kind}` fusion"
    return "other", f"`{kind}` fusion" + (f", backend_config kind `{launch.backend_kind}`" if launch.backend_kind else "")


def _item(program: ProgramRecord, target: str, hlo: CompiledLayer, listing: Listing, dot: DumpDot,
          launch: Instruction, matmuls: list[Instruction], kernels: list[Instruction], ran: dict[int, list[int]],
          words: dict) -> Item:
    computation = launch.computation
    first, last = listing.computations[computation]
    skill, printed = _kind(hlo, launch)
    where = "the entry computation" if any(x.entry and x.name == computation for x in hlo.computations) \
        else f"%{computation}"
    cite = f"{hlo.backend.upper()} HLO line"
    inside = ", ".join(f"%{m.name}" for m in matmuls)
    feedback = (f"The `dot` on line {dot.line} of the HLO before optimisations runs as %{launch.name} ({cite} "
                f"{launch.line}), {words.get(skill, words['other'])} ({printed}): {inside} came from it, by its "
                "name stack, source line and dataflow.")
    why = {k.line: (f"%{k.name} runs {'other dots' if len(ran[k.line]) > 1 else 'another dot'} of the HLO before "
                    f"optimisations (line {', '.join(map(str, ran[k.line]))}), not this one.")
           for k in kernels if k is not launch}
    return Item(
        question=(f"Each of these instructions of {where} (its listing is shown) runs one or more `dot`s of the HLO "
                  f"before optimisations. Which runs the one on its line {dot.line}?"),
        answer=kernel_choice(kernels, launch, why, cite),
        context=(Lines(target, first, last, cut=True, numbered=True),
                 Lines("hlo-before", dot.line, dot.line, cut=True, numbered=True), Note(which_compile(hlo))),
        card=(f"hlo-before-{dot.line}", target), layer=target, step="launch", skill=skill, primitive="dot_general",
        feedback=feedback,
        facts={"hlo_line": launch.line, "instruction": launch.name, "hlo_lines": [first, last], "line": dot.line,
               "runs": [m.name for m in matmuls]})
