"""How each equation's tag rides through XLA's one compile without changing what XLA prints.

XLA compiles the plain lowering (no tags, no source files: what `jax.jit(f).lower(*args)` makes with
`jax_traceback_in_locations_limit=0`), once. Before it does, each op of that module gets its
equation's tag, read from the tagged lowering op for op (the two lowerings have the same ops in the
same order), as a source file fused beside its own location: `loc(fused["jit(f)/add", "dgeqn7":1:1])`.
XLA names instructions and writes their `op_name` from the names in a location alone, so both stay
what the plain compile prints; the file becomes the instruction's `source_file`. Where XLA merges
two ops it fuses their locations: the same name twice is kept once, as in the plain compile, and
each tag is kept, the last one the one printed (the innermost, as the name-stack tags were read).
Where XLA keeps an instruction's op_name but not its source file (what it inlines from a call, what
the SPMD partitioner makes), `tag_of` reads the tag from the name, with the names `carry_tags` saw.

`tags_in_place` makes the same module of the tagged lowering itself, each location rewritten as the plain
lowering writes it, so a lowering no later stage reads is compiled without a second, plain one.

`shown_text` is the compiled text without the source fields: what XLA prints for the plain lowering,
byte for byte (`tests/test_hlo_tags.py` compiles both and compares). Before this, the tags rode in
the name stack and the plain lowering was compiled a second time for the text: two compiles of every
program instead of one.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from dumpgym.ir.mlir import ops_in_order


# The tag a traced equation carries in its name stack, and through the compile in its source file.
TAG = "dgeqn"
_TAG_RE = re.compile(TAG + r"(\d+)")


def innermost_tag(text: str) -> int | None:
    """The number of the last (innermost) tag in a location or an op_name, if it holds one."""
    found = _TAG_RE.findall(text)  # our own marker, searched only in text we asked JAX or XLA to carry
    return int(found[-1]) if found else None


# One `key=value` of a printed OpMetadata: a value is a C-escaped string in quotes, a braced list or a bare word.
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^ }]*) ?')
# How an instruction's printed form opens its metadata (a frontend attribute may be named `kernel_metadata`).
_METADATA = ", metadata={"
# What a source file puts in an instruction's metadata (as XLA prints an OpMetadata).
_SOURCE = frozenset({"source_file", "source_line", "source_end_line", "source_column", "source_end_column"})


class Names(NamedTuple):
    """The plain lowering's location names, each with the tags of the ops bearing it: of every op,
    and of each function's calls (with the functions they call)."""

    ops: dict[str, frozenset[int]]
    calls: dict[str, dict[str, frozenset[tuple[int, str]]]]  # function -> call name -> (tag, callee)


def carry_tags(tagged_module, plain_module) -> Names:
    """Give each op of `plain_module` (an `ir.Module`, changed in place) the tag its twin in
    `tagged_module` carries, as a source file fused beside its own location. Returns the plain
    module's location names with the tags of the ops bearing them (`tag_of` reads them)."""
    from jaxlib.mlir import ir

    from dumpgym.jax_internals import bare_location_name

    tagged_ops, plain_ops = ops_in_order(tagged_module), ops_in_order(plain_module)
    if [op.name for op in tagged_ops] != [op.name for op in plain_ops]:
        raise RuntimeError("the tagged lowering differs from the plain one; cannot carry its tags")
    ops: dict[str, set] = {}
    calls: dict[str, dict[str, set]] = {}
    function = ""
    with plain_module.context:
        files: dict[int, object] = {}
        for tagged, plain in zip(tagged_ops, plain_ops):
            if plain.name == "func.func":  # functions are the module's own ops: each op is in the last one begun
                function = plain.attributes["sym_name"].value
                continue
            location = tagged.location
            bare = bare_location_name(location)
            tag = innermost_tag(str(location) if bare is None else bare)
            if tag is None:
                continue
            if tag not in files:
                files[tag] = ir.Location.file(f"{TAG}{tag}", 1, 1)
            own = plain.location
            name = bare_location_name(own)
            if name is not None:
                ops.setdefault(name, set()).add(tag)
                if plain.name == "func.call":  # XLA puts its name before the op_names of what it inlines
                    calls.setdefault(function, {}).setdefault(name, set()).add(
                        (tag, plain.attributes["callee"].value))
            plain.location = ir.Location.fused([own, files[tag]])
    return Names(_frozen(ops), {f: _frozen(t) for f, t in calls.items()})


def tags_in_place(tagged_module, primitive_of) -> Names | None:
    """Make the tagged lowering's module (an `ir.Module`, changed in place) what `carry_tags` makes of the plain
    one: each op (and block argument) located where the plain lowering locates it, its names without the
    tags (`plain_name`), and each op's tag fused beside it as a source file. Then XLA compiles the one
    lowering, and the plain one need not be made. `primitive_of(tag)`: the primitive of the equation
    behind a tag. Returns `carry_tags`'s names, or None, the module untouched, where a location's plain
    form is not known for sure (lower the plain module then, and `carry_tags`). The tagged lowering must
    have had source locations off, as the plain one has, and hold no kernel body serialized with its tags."""
    from jaxlib.mlir import ir

    from dumpgym.jax_internals import bare_location_name

    ops: dict[str, set] = {}
    calls: dict[str, dict[str, set]] = {}
    function = ""
    moved = []
    with tagged_module.context:
        files: dict[int, object] = {}
        for op in ops_in_order(tagged_module):
            for region in op.regions:  # a block's arguments are located too (a function's at its call's name)
                for block in region.blocks:
                    for argument in block.arguments:
                        if TAG in str(argument.location):
                            plain = _untagged(argument.location, primitive_of)
                            if plain is None:
                                return None
                            moved.append((argument, plain))
            location = op.location
            bare = bare_location_name(location)
            shown = str(location) if bare is None else bare
            if op.name == "func.func":
                function = op.attributes["sym_name"].value
            if TAG not in shown:
                continue
            own = _untagged(location, primitive_of)
            if own is None:
                return None
            if op.name == "func.func":  # a function keeps the plain lowering's location, with no tag beside it
                moved.append((op, own))
                continue
            tag = innermost_tag(shown)
            if tag not in files:
                files[tag] = ir.Location.file(f"{TAG}{tag}", 1, 1)
            name = bare_location_name(own)
            if name is not None:
                ops.setdefault(name, set()).add(tag)
                if op.name == "func.call":  # XLA puts its name before the op_names of what it inlines
                    calls.setdefault(function, {}).setdefault(name, set()).add((tag, op.attributes["callee"].value))
            moved.append((op, ir.Location.fused([own, files[tag]])))
        for held, location in moved:  # only once every one could be read: a module given back untouched stays whole
            if isinstance(held, ir.BlockArgument):
                held.set_location(location)
            else:
                held.location = location
    return Names(_frozen(ops), {f: _frozen(t) for f, t in calls.items()})


def _untagged(location, primitive_of, primitive: str | None = None):
    """`location` as the plain lowering has it: each name it is made of as `plain_name` gives it; None where
    it holds anything but names and unknown locations, or a name's plain form is not known. `primitive`: the
    primitive JAX wrote after the name stack in this location's name, as the name around it says."""
    from jaxlib.mlir import ir

    from dumpgym.jax_internals import location_parts

    parts = location_parts(location)
    if parts is None:
        return None
    name, child = parts
    if name is None:  # an unknown location
        return location
    # JAX locates an op an equation's own rule emits at `{name stack}/{primitive}` inside a name `{primitive}:`.
    inner = _untagged(child, primitive_of, name[:-1] if name.endswith(":") else None)
    plain = plain_name(name, primitive_of, primitive) if TAG in name else name
    if inner is None or plain is None:
        return None
    return ir.Location.name(plain, childLoc=inner)


# A name's part that is a tag alone, under transforms or not: `dgeqn7`, `jvp(dgeqn3)`, `transpose(jvp(dgeqn3))`.
_TAG_PART = re.compile(r"((?:[\w.-]+\()*)" + TAG + r"(\d+)(\)*)")


def plain_name(name: str, primitive_of, primitive: str | None = None) -> str | None:
    """A location's name in the tagged lowering (`jit(f)/jvp(dgeqn3)/jit(g)/dgeqn7/add`) as the plain one has
    it, or None where that is not known for sure. `primitive`: the primitive JAX wrote after the name stack
    (the last part), where the location around the name says so.

    JAX writes a name stack with each transform wrapping the one scope that follows it (`NameStack.__str__`:
    [jvp, jit(g)] prints `jvp(jit(g))`, [jvp] `jvp()`), then `/` and the primitive where the op came from an
    equation's own rule. A tag is a scope, always its equation's innermost: dropped alone, it leaves the rest
    as it was. What follows a tag under transforms depends on how its equation was lowered
    (`jax_internals.lowered_through_cache`): through JAX's lowering cache, the rest is the name of an op
    inlined from the rule's own function, joined as text, so the transforms wrap nothing (`jvp()/checkpoint`);
    else the rest is the same name stack, and they wrap the next scope (`jvp(jit(g))`), or nothing where only
    the primitive JAX wrote after the stack follows (`jvp()/add`: `primitive`, or the tag's own equation's,
    `primitive_of`)."""
    from dumpgym.jax_internals import lowered_through_cache

    parts = _top_level_parts(name)
    if parts is None:
        return None
    out: list[str] = []
    wrap, closing, tag = "", "", None  # the transforms of a dropped tag, wrapping nothing so far
    for n, part in enumerate(parts):
        found = _TAG_PART.fullmatch(part) if TAG in part else None
        if TAG in part and (found is None or len(found.group(3)) != found.group(1).count("(")):
            return None  # not a tag alone
        if wrap and lowered_through_cache(primitive_of(tag)):  # the rest joined after the tag's name as text
            out.append(f"{wrap}{closing}")
            wrap, closing = "", ""
        if found is not None:  # wrapped, in one name stack, by the transforms of the tag before it, if any
            wrap, closing, tag = wrap + found.group(1), found.group(3) + closing, int(found.group(2))
            continue
        if wrap:
            if n == len(parts) - 1 and part in (primitive, primitive_of(tag)):
                out.append(f"{wrap}{closing}")  # `jvp()`, then the primitive written after the stack
            else:
                part = f"{wrap}{part}{closing}"  # the next scope of the same stack, wrapped where the tag was
            wrap, closing = "", ""
        out.append(part)
    if wrap:
        out.append(f"{wrap}{closing}")
    return "/".join(out)


_SCOPE_MARKS = re.compile(r"[()/]")


def _top_level_parts(name: str) -> list[str] | None:
    """`name` split at each `/` outside parentheses; None where the parentheses do not balance."""
    parts, depth, start = [], 0, 0
    for mark in _SCOPE_MARKS.finditer(name):  # no other character changes the depth or splits
        char, i = mark.group(), mark.start()
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0:
            parts.append(name[start:i])
            start = i + 1
    if depth:
        return None
    parts.append(name[start:])
    return parts


def _frozen(table: dict) -> dict:
    return {key: frozenset(values) for key, values in table.items()}


def metadata_fields(printed: str) -> dict[str, str]:
    """The fields of an instruction's printed `metadata={...}` (values as printed, strings in their quotes)."""
    at = printed.find(_METADATA)
    if at < 0:
        return {}
    fields, _end = _read_metadata(printed, at + len(_METADATA))
    return dict(fields)


def _read_metadata(text: str, start: int) -> tuple[list[tuple[str, str]], int]:
    """The (key, value) fields of the metadata opening at `start` (just after its `{`), and where its `}` is."""
    fields, i = [], start
    while text[i] != "}":
        field = _FIELD.match(text, i)
        if field is None:
            raise ValueError(f"unreadable HLO metadata at {text[start - 10:start + 60]!r}")
        fields.append((field.group(1), field.group(2)))
        i = field.end()
    return fields, i


def tag_of(printed: str, names: Names) -> int | None:
    """The tag number an instruction's printed form carries: in its metadata's source file; else,
    where XLA kept only the op_name, read from the name (`names`, `carry_tags`'s).

    XLA keeps only the op_name on what it inlines from a call, the call's own name put before it
    (calls in private functions are named from their body: `jit(f)/jit(g)` then `jit(h)`): the name
    is read as a chain of call names, and the instruction is the innermost call's equation, where
    that call's name stands for one tag alone. A call with no name of its own (a lowering rule's
    private function, as `random_bits` calls `threefry2x32`) adds nothing to the names of what it
    inlines: a name going on past the chain is that call's body's. That is true but can be coarse: the
    equation inside the call that emitted the op is not named (its own name, after the chain, is too
    common to tell). A name that is no chain stands for the tag of the ops bearing it, if they all
    bear the same. A name that ends at the chain where a nameless call stands is read as the chain's
    own tag (`tag_choices` gives the nameless call's too)."""
    return tag_choices(printed, names)[0]


def tag_choices(printed: str, names: Names) -> tuple[int | None, int | None]:
    """`tag_of`'s tag, and, where the name ends at a call chain whose last function makes a call with no
    name of its own, that call's tag: a nameless op of the function's own body (a literal JAX lowered
    with no location) and a nameless op of the body the nameless call inlined print the same op_name,
    and only what the instruction feeds tells them apart (`CompiledGraph` reads it)."""
    return tag_choices_of(metadata_fields(printed), names)


def tag_choices_of(fields: dict[str, str], names: Names) -> tuple[int | None, int | None]:
    """`tag_choices` of an instruction whose metadata's fields (`metadata_fields`) are read already."""
    file = fields.get("source_file")
    if file is not None and TAG in file:
        return innermost_tag(file), None
    op_name = fields.get("op_name")
    if op_name is None:
        return None, None
    # JAX names a module's entry function `main`; an inlined instruction's name starts at one of its calls
    rest, tag, function, chained = _unquoted(op_name), None, "main", False
    seen = set()
    while function not in seen:
        seen.add(function)
        table = names.calls.get(function, {})
        cut = len(rest)
        while cut > 0 and rest[:cut] not in table:
            cut = rest.rfind("/", 0, cut)
        if cut > 0:
            made, rest = table[rest[:cut]], rest[cut + 1:]
        elif rest and "" in table:  # a call with no name of its own (its equation's name stack is empty) adds
            # none to what it inlines
            made = table[""]
        elif chained and "" in table:
            nameless = {t for t, _ in table[""]}
            return tag, (next(iter(nameless)) if len(nameless) == 1 else None)
        else:
            break
        tags, callees = {t for t, _ in made}, {c for _, c in made}
        tag, chained = (next(iter(tags)) if len(tags) == 1 else None), True
        if len(callees) != 1:
            break
        function = next(iter(callees))
    if chained:
        return tag, None
    tags = names.ops.get(rest, ())
    return (next(iter(tags)) if len(tags) == 1 else None), None


def _unquoted(value: str) -> str:
    """A C-escaped string as XLA prints it (in quotes), as the text it stands for."""
    inner = value[1:-1]
    if "\\" not in inner:
        return inner
    return inner.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


def shown_text(printed: str) -> str:
    """A compiled module's text as XLA prints it for the plain lowering: each instruction's metadata
    without its source fields (the plain lowering has no source file), a metadata left empty gone whole."""
    return shown_text_and_metadata(printed)[0]


def shown_text_and_metadata(printed: str) -> tuple[str, dict[str, dict[str, str]]]:
    """`shown_text`, and the fields of each printed instruction's metadata (`metadata_fields`, source fields
    too) by the instruction's name, read in the same pass: the compile's metadata is read once."""
    out, pos = [], 0
    by_name: dict[str, dict[str, str]] = {}
    while (at := printed.find(_METADATA, pos)) >= 0:
        start = at + len(_METADATA)
        fields, end = _read_metadata(printed, start)
        head = printed[printed.rfind("\n", 0, at) + 1:at].lstrip().removeprefix("ROOT ")
        if head.startswith("%") and " = " in head:  # `%name = shape opcode(...)`: the line defines `name`
            by_name[head[1:head.index(" = ")]] = dict(fields)
        kept = [f"{key}={value}" for key, value in fields if key not in _SOURCE]
        if kept:
            out += [printed[pos:start], " ".join(kept)]
        else:  # `, metadata={source_file=...}`: the plain compile prints no metadata at all
            out.append(printed[pos:at])
            end += 1
        pos = end
    out.append(printed[pos:])
    return "".join(out), by_name
