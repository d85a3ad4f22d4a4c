"""The partitioner drill: what each device holds of a sharded array, and which devices a collective joins.

Read from the record of the StableHLO (`lowered`: main's `sdy.sharding` attributes,
`sdy.sharding_constraint`, collectives' `replica_groups`, as MLIR's Shardy bindings read them when the
program was lowered) and of the TPU and GPU compiles (each such layer: entry parameters' `sharding={...}` as
XLA's `HloSharding` read them, collectives' `replica_groups`, when it was compiled). The CPU
compile is never used: its text depends on the host. Two questions (`step`), each answered by
building the answer: `shard-shape` (type the shape of each device's block of a sharded value) and
`group-axis` (tap the mesh axes that a set of devices runs along: a collective's groups, skill
`collective`, or the devices holding copies of one block under `last_tile_dim_replicate`, skill
`copies`). Device numbers are positions in the mesh's device order, so a group's mesh axes are the
coordinates its positions differ in.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

from dumpgym.drills import drill
from dumpgym.drills import _sharding as sh
from dumpgym.drills._spread import answer_step, spread_weight
from dumpgym.drills._tpu import Buffer, Listing, which_compile
from dumpgym.drills.item import AxisSet, Item, Lines, Misreading, Typed, refer
from dumpgym.drills.answer import axes_key
from dumpgym.record.schema import CompiledLayer, Instruction, ProgramRecord


# What one item asks about, beside its step and layer: the first of these facts it has, else its equation.
_ABOUT = ("argument", "result", "instruction", "stablehlo_line")


def _item(program: ProgramRecord, draft: dict) -> Item:
    """The pool's item for a draft; its card is the step, the layer and what it asks about (`argument=0`,
    `instruction=param.3`, `stablehlo_line=41`, or the equation)."""
    layer = draft["layer"]  # stablehlo, or a TPU or GPU layer's compile target id
    about = next((f"{k}={draft[k]}" for k in _ABOUT if k in draft), f"eqn={draft['eqn']}")
    if draft["skill"] == "copies":
        about = "copies-" + about  # a parameter's block and its copies are two questions
    facts = {k: v for k, v in draft.items() if k not in _DRAFT_KEYS}
    return Item(question=draft["question"], answer=draft["form"], feedback=draft["feedback"], eqn=draft["eqn"],
                step=draft["step"], skill=draft["skill"], card=(draft["step"], layer, about), layer=layer,
                context=_numbered(refer(program, (layer, "jaxpr"), draft["shown"])), facts=facts)


def _numbered(context: tuple) -> tuple:
    """Listing lines shown beside their numbers: a question names its StableHLO line by number."""
    return tuple(replace(b, numbered=True) if isinstance(b, Lines) else b for b in context)


_DRAFT_KEYS = ("question", "form", "feedback", "eqn", "step", "skill", "layer", "shown")


def _typed_shape(answer, wrong) -> Typed | None:
    """A typed per-device shape (`[16,32]`) with the shapes the misreadings give; None with fewer than two."""
    misread = {}
    for shape, rule, reason in wrong:
        if shape is not None and shape != answer and _shape_text(shape) not in misread:
            misread[_shape_text(shape)] = Misreading(reason, rule)
    return Typed("shape", _shape_text(answer), misread=misread) if len(misread) >= 2 else None


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _mesh_axes(mesh, axes, misread: dict) -> AxisSet:
    """Tap the mesh axes (one chip per axis, its size) that a set of devices runs along."""
    label = "the mesh: " + " × ".join(f"`{name}`={size}" for name, size in mesh)
    return AxisSet(label, tuple(size for _, size in mesh), tuple(axes), misread)


# A program with more items shares 6 of weight among them.
@drill("partitioner", number="06", title="the partitioner",
       aim="Read a sharding down to each device's block, and a collective's device groups back to mesh axes.",
       per_program=6, cap_by=("step",))
def partitioner_items(program: ProgramRecord) -> list[Item]:
    """Per-device blocks of every sharded argument (StableHLO, TPU and GPU compiles), copies under
    `last_tile_dim_replicate`, and the mesh axes of every collective's device groups."""
    return _shared_by_answer(_asked(program))


def _asked(program: ProgramRecord) -> list[Item]:
    """The program's items, not yet weighted."""
    if not program.mesh:
        return []
    module = sh.sdy_module(program)
    if module is None:
        return []
    items = [*_stablehlo_blocks(program, module), *_stablehlo_groups(program, module)]
    for target, hlo in {**program.layers("tpu"), **program.layers("gpu")}.items():
        if not hlo.has_facts:
            continue
        items += [*_tpu_parameters(program, target, hlo, module), *_tpu_groups(program, target, hlo, module)]
    return [_item(program, item) for item in items]


GROUP_STEP = "partitioner/group-axis"


@answer_step(GROUP_STEP)
def _groups_asked(program: ProgramRecord) -> list[str]:
    return [axes_key(i.answer.axes) for i in _asked(program) if i.step == "group-axis"]


def _shared_by_answer(items: list[Item]) -> list[Item]:
    """Items of one step with the same answer share one item's weight, so that no answer (`model` alone,
    say) is what the sampler asks most because one program asks it of many values; and a set of mesh axes
    is weighted over the number of built-in programs that ask it (`_spread`): every two-axis mesh has
    collectives over its last axis, and tapping it must not pay."""
    def key(item: Item):
        return (item.step, getattr(item.answer, "value", None) or getattr(item.answer, "axes", None))
    counts = Counter(key(i) for i in items)
    return [replace(i, weight=round(1 / counts[key(i)] * (
        spread_weight(GROUP_STEP, axes_key(i.answer.axes)) if i.step == "group-axis" else 1), 3)) for i in items]


# --- shared wording ---------------------------------------------------------------------------

def _mesh_words(mesh) -> str:
    return ", ".join(f"`{name}`={size}" for name, size in mesh)


def _axis_words(axes) -> str:
    return " and ".join(f"`{a}`" for a in axes)


def _counts_words(counts) -> str:
    return ", ".join(f"axis {k} {c} ways" for k, c in enumerate(counts) if c > 1) or "no axis"


def _eqn_at_stablehlo_line(program: ProgramRecord, line: int, primitives) -> int | None:
    """The innermost equation whose x-ray group holds this StableHLO line and has one of these primitives."""
    found = [g.eqn for g in program.xray if line in g.stablehlo_lines
             and program.eqns[g.eqn].primitive in primitives]
    return max(found) if found else None


# --- StableHLO: blocks ------------------------------------------------------------------------

def _tensor(shape, printed_type: str) -> str:
    """A StableHLO tensor type with another shape and the printed type's element type."""
    element = printed_type[len("tensor<"):-1].split("x")[-1]
    return f"tensor<{'x'.join(str(d) for d in shape)}x{element}>" if shape else f"tensor<{element}>"


def _sdy_counts(axes, mesh: dict) -> tuple[int, ...]:
    return tuple(math.prod(mesh[a] for a in names) for names in axes)


def _sdy_misreadings(value: sh.SdyValue, mesh: dict):
    """Wrong blocks for an `sdy.sharding`, each with its rule and its reason in this value's terms."""
    counts = _sdy_counts(value.axes, mesh)
    total = math.prod(mesh.values())
    yield (sh.divided(value.shape, counts[::-1]), "wrong-axis",
           f"cut the other array axis; the sharding's entries go array axis by array axis, and it splits "
           f"{_counts_words(counts)}")
    for k, names in enumerate(value.axes):
        others = [(n, s) for n, s in mesh.items() if n not in names]
        if names and others:
            other, size = others[0]
            swapped = tuple(size if j == k else c for j, c in enumerate(counts))
            yield (sh.divided(value.shape, swapped), "other-mesh-axis",
                   f"divided axis {k} by `{other}`'s size ({size}); it is split over {_axis_words(names)} "
                   f"({counts[k]} ways)")
    whole = tuple(total if c > 1 else 1 for c in counts)
    yield (sh.divided(value.shape, whole), "whole-mesh",
           f"divided by all {total} devices of the mesh; the sharded axes are split only over "
           f"{_axis_words(sorted({a for names in value.axes for a in names}))}, the rest of the mesh holds copies")
    yield (value.shape, "global-shape",
           f"took the printed type for each device's block; at this layer {value.type} is the whole array, "
           "and the sharding says how it is cut")


def _stablehlo_blocks(program: ProgramRecord, module: sh.SdyModule) -> list[dict]:
    mesh = dict(module.mesh)
    lines = program.stablehlo.splitlines()
    items = []
    for value in module.values:
        counts = _sdy_counts(value.axes, mesh)
        answer = sh.divided(value.shape, counts)
        if answer is None or answer == value.shape:
            continue  # a replicated value's block is its printed type: nothing to read
        if value.what == "constraint":
            # A sharding_constraint's, or the jit's whose in_shardings or out_shardings constrain its body.
            where, eqn = lines[value.index - 1].strip(), _eqn_at_stablehlo_line(
                program, value.index, {"sharding_constraint", "jit", "pjit"})
            name = f"the constrained value (StableHLO line {value.index})"
        else:
            where, eqn = sh.signature_part(lines, value), None
            name = f"main's {value.what} {value.index}"
        form = _typed_shape(answer, list(_sdy_misreadings(value, mesh)))
        if form is None or _tensor(answer, value.type) in where:
            continue
        cut = " and ".join(f"axis {k} over {_axis_words(names)} ({c} ways)"
                           for k, (names, c) in enumerate(zip(value.axes, counts)) if c > 1)
        items.append({
            "eqn": eqn, "layer": "stablehlo", "step": "shard-shape", "skill": "sdy-sharding",
            ("stablehlo_line" if value.what == "constraint" else value.what): value.index,
            "question": f"What shape is each device's block of {name}?",
            "shown": [lines[module.mesh_line - 1].strip(), where], "form": form,
            "feedback": f"the sharding cuts {cut}: {value.type} is {_tensor(answer, value.type)} on each device",
        })
    return items


# --- device groups ----------------------------------------------------------------------------

def _group_form(groups, mesh, printed: str | None) -> tuple[AxisSet, str] | None:
    """Tap the mesh axes a collective's groups run over (a mesh of two or more axes), and the feedback."""
    names, sizes = tuple(n for n, _ in mesh), tuple(s for _, s in mesh)
    found = sh.group_axes(groups, sizes)
    if found is None or len(names) < 2:
        return None
    plain = sh.groups_without_transpose(printed, groups) if printed else None
    plain_axes = sh.varying_axes(plain[0], sizes) if plain and len(plain) > 1 else None
    misread = {}
    for axes in [(a,) for a in range(len(names))] + [tuple(range(len(names)))]:
        if axes != found:
            rule, reason = _group_misreading(axes, found, groups, names, sizes,
                                             printed if axes == plain_axes else None, plain)
            misread[axes_key(axes)] = Misreading(reason, rule)
    feedback = (f"the first group {sh.group_text(groups[0])} holds positions that differ only in "
                f"{_axis_words(names[a] for a in found)}: {_group_label(found, names, sizes)}")
    return _mesh_axes(mesh, found, misread), feedback


def _group_misreading(axes, found, groups, names, sizes, printed, plain) -> tuple[str, str]:
    """The rule and reason behind offering `axes` for groups that run over `found`."""
    first, along = sh.group_text(groups[0]), _axis_words(names[a] for a in found)
    if printed is not None:
        return "ignored-transpose", (
            f"read `{printed}` without its `{printed[printed.index('T('):]}`: that numbers the groups "
            f"{sh.group_text(plain[0])}, {sh.group_text(plain[1])}, ..., along {_axis_words(names[a] for a in axes)}; "
            f"the transpose makes them {first}, {sh.group_text(groups[1])}, ..., which differ in {along}")
    if len(axes) == len(names):
        return "groups-as-one", (f"took the {len(groups)} groups for one; each holds {len(groups[0])} of the "
                                 f"{math.prod(sizes)} devices, positions that differ only in {along}")
    other = sh.group_text(sh.groups_along(axes, sizes)[0])
    if len(found) == len(names):
        return "one-axis-only", (f"read {first} as one mesh axis; a group over `{names[axes[0]]}` alone would be "
                                 f"{other}, this one holds every device")
    return "other-axis", (f"read the groups as `{names[axes[0]]}`: a group over it would be {other}; the positions "
                          f"in {first} differ in {along}")


def _group_label(axes, names, sizes) -> str:
    if len(axes) == len(names):
        return f"over every axis ({_axis_words(names)}): all {math.prod(sizes)} devices"
    return f"over {_axis_words(names[a] for a in axes)} only"


def _group_question(opname: str, where: str) -> str:
    return f"Over which mesh axes does this `{opname}` ({where}) run?"


def _stablehlo_groups(program: ProgramRecord, module: sh.SdyModule) -> list[dict]:
    lines = program.stablehlo.splitlines()
    items = []
    for c in module.collectives:
        made = _group_form(c.groups, module.mesh, None)
        if made is None:
            continue
        items.append({
            "eqn": _eqn_at_stablehlo_line(program, c.line, _COLLECTIVE_PRIMITIVES), "layer": "stablehlo",
            "step": "group-axis", "skill": "collective", "stablehlo_line": c.line,
            "question": _group_question(c.name.split(".")[-1], f"StableHLO line {c.line}"),
            "shown": [lines[module.mesh_line - 1].strip(), lines[c.line - 1].strip()],
            "form": made[0], "feedback": made[1],
        })
    return items


_COLLECTIVE_PRIMITIVES = frozenset({"psum", "psum2", "psum_invariant", "pmax", "pmin", "all_gather",
                                    "all_gather_invariant", "reduce_scatter", "psum_scatter", "all_to_all",
                                    "ppermute", "pbroadcast"})


# What a partitioner item's line leaves out (its metadata names the argument; its sharding is the question's).
_NOT_SHOWN = frozenset({"backend_config", "frontend_attributes"})


def _short_line(ins: Instruction, text: str) -> str:
    """A compiled line without its backend config and frontend attributes."""
    return ins.without(text, _NOT_SHOWN)


def _tpu_groups(program: ProgramRecord, target: str, hlo: CompiledLayer, module: sh.SdyModule) -> list[dict]:
    """One item per distinct collective of a TPU or GPU compile (fused copies of one all-gather are asked once)."""
    listing = Listing(hlo)
    groups = {g.line: g for g in hlo.replica_groups}
    items, asked = [], set()
    for ins in hlo.instructions:
        text = listing.lines[ins.line - 1]
        d, printed = listing.definition(ins), groups[ins.line].printed if ins.line in groups else None
        seen = (d.opcode, printed, tuple(b.plain for b in d.buffers)) if d is not None else None
        if d is None or printed is None or d.opcode.endswith("-done") or seen in asked:
            continue  # the same collective fused into several computations (layouts aside) is asked once
        asked.add(seen)
        made = _group_form([list(g) for g in groups[ins.line].groups], module.mesh, printed)
        if made is None:
            continue
        items.append({
            "eqn": ins.eqns[0] if len(ins.computed_eqns) == 1 else None, "layer": target, "step": "group-axis",
            "skill": "collective", "hlo_line": ins.line, "instruction": ins.name,
            # named, not cited by line: the block below is the line made shorter, not a numbered listing line
            "question": _group_question(d.opcode, f"%{ins.name}"),
            "shown": [which_compile(hlo), _mesh_note(module), _short_line(ins, text)],
            "form": made[0], "feedback": made[1],
        })
    return items


def _mesh_note(module: sh.SdyModule) -> str:
    return _mesh_note_of(module.mesh)


def _mesh_note_of(mesh) -> str:
    return (f"the program's mesh: {_mesh_words(mesh)}; device numbers in this listing are positions "
            "in the mesh's device order")


# --- TPU compile: entry parameters -----------------------------------------------------------

def _tpu_parameters(program: ProgramRecord, target: str, hlo: CompiledLayer, module: sh.SdyModule) -> list[dict]:
    listing = Listing(hlo)
    arguments = {v.index: v for v in module.values if v.what == "argument"}
    items = []
    for p in hlo.entry_parameters:
        ins = listing.at[p.line]
        text = listing.lines[ins.line - 1]
        value = arguments.get(p.number)
        d = listing.definition(ins)
        if value is None or d is None or not d.buffers:
            continue
        split = sh.hlo_split(p.sharding, len(value.shape))
        if split is None:
            continue
        param = _Param(program, target, hlo, ins, text, d.buffers[0], value, split,
                       p.op_name or f"argument {p.number}", module.mesh)
        items += [i for i in (param.block_item(), param.copies_item()) if i is not None]
    return items


@dataclass(frozen=True)
class _Param:
    """One sharded entry parameter of the TPU compile, with what it takes to ask about it."""

    program: ProgramRecord
    target: str  # the compile target id of the layer
    hlo: CompiledLayer
    ins: Instruction
    text: str  # its printed line
    buffer: Buffer  # its per-device shape, as XLA prints it
    value: sh.SdyValue  # its StableHLO argument: the global shape
    split: sh.HloSplit  # its sharding, as XLA reads it
    name: str
    mesh: tuple[tuple[str, int], ...]  # the program's mesh: axis names and sizes

    @property
    def global_text(self) -> str:
        """The parameter's global shape, written as the compile writes shapes: `f32[64,32]`."""
        return self._shape_text(self.value.shape)

    def _shape_text(self, shape) -> str:
        return f"{self.buffer.dtype}[{','.join(str(d) for d in shape)}]"

    def _shown(self) -> list[str]:
        masked = _short_line(self.ins, self.text).replace(self.buffer.text, f"{self.buffer.dtype}[?]", 1)
        return [which_compile(self.hlo), f"`{self.name}` is {self.global_text} (its global shape)", masked]

    def block_item(self) -> dict | None:
        """Which block does each device hold? Skipped where XLA's own parameter shape disagrees."""
        answer = sh.divided(self.value.shape, self.split.counts)
        if answer is None or answer == self.value.shape or answer != self.buffer.dims:
            return None
        form = _typed_shape(answer, list(self._misreadings()))
        if form is None:
            return None
        feedback = (f"`devices=[{','.join(map(str, self.split.tiles.shape))}]` splits {_counts_words(self.split.counts)}"
                    + (f", and its last count ({self.split.copies}) holds copies" if self.split.copies > 1 else "")
                    + f": {self.global_text} is {self._shape_text(answer)} on each device")
        return self._item("shard-shape", "hlo-sharding", f"What shape is each device's block of `{self.name}`?",
                          form, feedback)

    def _misreadings(self):
        split, shape = self.split, self.value.shape
        counts, total = split.counts, split.tiles.size
        if split.copies > 1:
            extra = tuple(c * split.copies if k == len(counts) - 1 else c for k, c in enumerate(counts))
            yield (sh.divided(shape, extra), "forgot-replicate",
                   f"forgot `last_tile_dim_replicate`: took the last count ({split.copies}) as one more split of "
                   f"the last axis; it counts the devices holding copies of each block")
        if split.reshape is not None and len(split.reshape) == len(shape):
            yield (sh.divided(shape, split.reshape), "reshape-as-tiles",
                   f"read `<=[{','.join(map(str, split.reshape))}]` as the split counts; it only orders the "
                   f"devices, and the counts are `devices=[...]`: {_counts_words(counts)}")
        yield (sh.divided(shape, counts[::-1]), "wrong-axis",
               f"cut the other array axis; `devices=[...]` lists the counts array axis by array axis, and it splits "
               f"{_counts_words(counts)}")
        if split.copies > 1:
            yield (sh.divided(shape, tuple(total if c > 1 else 1 for c in counts)), "whole-mesh",
                   f"divided by all {total} devices; {split.copies} of them hold copies of each block, so the "
                   f"split is {_counts_words(counts)}")
        yield (shape, "global-shape",
               f"took the global shape {self.global_text} for each device's block; the sharding cuts "
               f"{_counts_words(counts)}")

    def copies_item(self) -> dict | None:
        """Along which mesh axes, if any, lie the devices that hold the same block as device 0? Asked where
        those devices are whole mesh axes: none for a sharding that gives every device a block of its own,
        every axis for a replicated one, the copies' axes under `last_tile_dim_replicate`."""
        split, sizes = self.split, tuple(size for _, size in self.mesh)
        names = tuple(name for name, _ in self.mesh)
        replicated = split.tiles.size == 1
        if len(sizes) < 2 or not (replicated or split.tiles.size == math.prod(sizes)):
            return None
        answer = tuple(range(math.prod(sizes))) if replicated else sh.sharing_first_block(split)
        if answer[0] != 0:
            return None
        axes = self._axes_of(answer, sizes)
        if axes is None:
            return None
        wrong = []
        if replicated:
            wrong.append(((), "replicated-as-split",
                          "read the parameter as cut among the devices; `{replicated}` gives every device the whole "
                          "array, so every device holds what device 0 holds"))
            why = "`{replicated}`: every device holds the whole array, so the copies run along every mesh axis"
        elif split.copies == 1:
            wrong.append((sh.varying_axes(sh.along_first_split(split), sizes), "split-as-copies",
                          "took the devices that split the array among them for copies; each of them holds a block "
                          "of its own"))
            why = (f"`devices=[{','.join(map(str, split.tiles.shape))}]` uses every device for a block of its own "
                   "(no `last_tile_dim_replicate`): no other device holds device 0's block")
        else:
            wrong.append(((), "forgot-replicate",
                          f"forgot `last_tile_dim_replicate`: read every device as holding a block of its own; the "
                          f"last count ({split.copies}) says {split.copies} devices share each block"))
            plain = sh.without_transpose(split)
            if plain is not None:
                wrong.append((sh.varying_axes(sh.sharing_first_block(plain), sizes), "ignored-transpose",
                              "skipped the `T(...)` after the device list: it transposes the numbered devices "
                              "before they are laid out, so the copies are not the next numbers"))
            wrong.append((sh.varying_axes(sh.along_first_split(split), sizes), "split-as-copies",
                          "took the devices that split the array among them for copies; they hold different "
                          "blocks, the copies sit along the last count"))
            why = (f"devices {sh.group_text(answer)} hold device 0's block (the last count, {split.copies}, "
                   f"counts copies); their positions differ in {_axis_words(names[a] for a in axes)}")
        misread = {}
        for got, rule, reason in wrong:
            if tuple(got) != axes and axes_key(got) not in misread:
                misread[axes_key(got)] = Misreading(reason, rule)
        question = (f"Which mesh axes, if any, do the devices that hold the same block of `{self.name}` as "
                    "device 0 lie along?")
        return self._item("group-axis", "copies", question, _mesh_axes(self.mesh, axes, misread), why,
                          masked=False)

    @staticmethod
    def _axes_of(positions, sizes) -> tuple[int, ...] | None:
        """The mesh axes these device positions run along (none for one device), when they are every
        position along them."""
        axes = sh.varying_axes(positions, sizes)
        return axes if len(positions) == math.prod(sizes[a] for a in axes) else None

    def _item(self, step: str, skill: str, question: str, form, feedback: str, masked: bool = True) -> dict:
        shown = self._shown() if masked else [which_compile(self.hlo), _mesh_note_of(self.mesh), _short_line(self.ins, self.text)]
        return {"eqn": None, "layer": self.target, "step": step, "skill": skill, "hlo_line": self.ins.line,
                "instruction": self.ins.name, "argument": self.value.index, "question": question, "shown": shown,
                "form": form, "feedback": feedback}
