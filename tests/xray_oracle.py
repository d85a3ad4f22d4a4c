"""An attribution of StableHLO op lines computed independently of dumpgym's tags.

It reads the locations JAX itself writes in an ordinary (untagged) lowering, the
use-def chains of the module, and the user source line of each equation, and
judges every attributed op line by the first rule that applies:

1. the location names a primitive (or `jit(NAME)` for a call, or the call's
   callee is named after a primitive): the most specific owner must be an
   equation with that primitive (and name);
2. a constant whose location names no primitive: same owners as its first user;
3. an op in a private function that no jaxpr jit produced (a lowering rule made
   it): same owners as the calls to that function;
4. an op inside a region: same owners as the op holding the region;
5. otherwise (a lowering rule emitting inner steps under their own names): an
   owner's user source line must appear in the op's location;
6. such an inner step with no source location at all (a rule lowering a helper
   it traced itself, like threefry's `random_bits`), or one inside a region whose
   holder's owners do not include it (logistic's `neg` in a `case` branch): JAX
   lowering an owner equation by itself must emit an op of that name at that
   location name.
"""
from __future__ import annotations

import inspect

from jax._src import source_info_util
from jaxlib.mlir import ir

JIT = {"jit", "pjit"}  # jit's primitive (JAX before 0.7 named it pjit)
STRUCTURAL = {"builtin.module", "func.func", "func.return", "stablehlo.return", "sdy.return", "sdy.mesh"}


def _ops(module):
    out = []

    def visit(op, function, holder):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    fn = child.attributes["sym_name"].value if child.name == "func.func" else function
                    out.append((child, fn, holder))
                    visit(child, fn, None if child.name == "func.func" else child)

    visit(module.operation, None, None)
    return out


def _is(loc, kind: str) -> bool:
    """Whether `loc` is a `kind` location ("Name", "CallSite", "Fused", "FileLineCol").

    jaxlib 0.6 (the oldest JAX dumpgym supports) has no Location subclasses, only `is_a_*` tests.
    """
    if hasattr(ir, "NameLoc"):
        return isinstance(loc, getattr(ir, kind + "Loc"))
    test = {"Name": "is_a_name", "CallSite": "is_a_callsite", "Fused": "is_a_fused", "FileLineCol": "is_a_file"}
    return getattr(loc, test[kind])()


def _user_frame(source_info):
    """JAX's own user frame of an equation: JAX 0.6 reads it from the SourceInfo, later JAX from its traceback."""
    if "traceback" in inspect.signature(source_info_util.user_frame).parameters:
        return source_info_util.user_frame(source_info.traceback)
    return source_info_util.user_frame(source_info)


def _location_parts(loc):
    names, files, stack = [], set(), [loc]
    while stack:
        loc = stack.pop()
        if _is(loc, "Name"):
            names.append(loc.name_str)
            stack.append(loc.child_loc)
        elif _is(loc, "CallSite"):
            stack.extend([loc.callee, loc.caller])
        elif _is(loc, "Fused"):
            stack.extend(loc.locations)
        elif _is(loc, "FileLineCol"):
            files.add((loc.filename, loc.start_line))
    return names, files


def _jit_function(function: str, jit_functions: set[str]) -> bool:
    """Whether an MLIR function is a `jit`'s body: named after it, or with MLIR's `_N` suffix when the
    name was taken (two jits of one `_take` lower to `_take` and `_take_1`)."""
    base, sep, n = function.rpartition("_")
    return function in jit_functions or (bool(sep) and n.isdigit() and base in jit_functions)


def _emitted_alone(op, last: str, got, jax_eqns) -> bool:
    """Whether JAX, lowering one of the equations `got` by itself, emits an op of this name under this location name."""
    return bool(got) and any((op.name, last) in _lowered_alone(jax_eqns[e]) for e in got)


def _lowered_alone(eqn) -> set[tuple[str, str]]:
    """(op name, innermost location name) of every op JAX emits when it lowers `eqn` by itself."""
    import jax

    # Weak types kept: a rule can lower a weakly typed input differently (a gather converts its indices).
    args = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=getattr(v.aval, "weak_type", False))
            for v in eqn.invars]
    module = jax.jit(lambda *xs: eqn.primitive.bind(*xs, **eqn.params)).lower(*args).compiler_ir("stablehlo")
    out = set()
    for op, _, _ in _ops(module):
        names, _ = _location_parts(op.location)
        # Names inside the lone jit start with its own scope; a program's function body names none.
        path = names[0].split("/") if names else [""]
        if path[0] == "jit(<lambda>)":
            path = path[1:] or [""]
        out.add((op.name, path[-1]))
    return out


def judge(record: dict, lowered_module, jax_eqns: dict) -> list[str]:
    """Return one message per op line whose attribution disagrees with the independent rules."""
    eqns = record["eqns"]
    owners: dict[int, set[int]] = {}
    for group in record["xray"]:
        for line in group["stablehlo_lines"]:
            owners.setdefault(line, set()).add(group["eqn"])
    children = {}
    for e in eqns:
        if e["parent"] is not None:
            children.setdefault(e["parent"], set()).add(e["id"])

    def specific(line):
        own = owners.get(line, set())
        return {e for e in own if not (children.get(e, set()) & own)}

    ops = [t for t in _ops(lowered_module) if t[0].name not in STRUCTURAL]
    lines = [o["line"] for o in record["stablehlo_ops"]]
    assert [o["name"] for o in record["stablehlo_ops"]] == [op.name for op, _, _ in ops]
    line_of = {op: line for (op, _, _), line in zip(ops, lines)}
    jit_functions = {e["params"]["name"] for e in eqns if e["primitive"] in JIT}
    calls = {}
    for op, _, _ in ops:
        if op.name == "func.call":
            calls.setdefault(op.attributes["callee"].value, []).append(line_of[op])

    problems = []
    for op, function, holder in ops:
        line = line_of[op]
        got = specific(line)
        names, files = _location_parts(op.location)
        last = names[0].split("/")[-1] if names else ""
        prims = {eqns[e]["primitive"] for e in got}
        if not got:
            problems.append(f"line {line}: {op.name} attributed to nothing")
            continue
        if op.name == "func.call" and op.attributes["callee"].value in prims:
            ok = True  # a lowering rule's private function, named after its primitive (argmax)
        elif op.name == "func.call" and last.startswith("jit(") and last[4:-1] in jit_functions:
            ok = any(eqns[e]["primitive"] in JIT and f"jit({eqns[e]['params']['name']})" == last for e in got)
        elif last in prims:
            ok = True
        elif op.name == "stablehlo.constant":
            users = sorted(line_of[u.owner.operation] for u in op.result.uses if u.owner.operation in line_of)
            ok = bool(users) and got == specific(users[0])
        elif function not in (None, "main") and not _jit_function(function, jit_functions) and function in calls:
            # the body of a private function belongs to every equation that calls it (forward and
            # backward scans share `dynamic_index_in_dim`): the union of its call sites' owners, or, where
            # the function is a loop's body holding a loop of its own (a fori_loop inside lax.map), an
            # equation inside those owners whose user source line the op's location names
            callers = set().union(*(specific(c) for c in calls[function]))
            ok = got == callers or (all(_inside(e, callers, eqns) for e in got)
                                    and _at_user_line(got, files, jax_eqns))
        elif holder is not None and holder in line_of:
            # A region's op belongs to its holder's owners, or (a branch of a `case`, a loop body) to an
            # equation inside it whose own lowering emits that op under that name (logistic's `neg`).
            ok = got <= owners.get(line_of[holder], set()) or (
                bool(got) and all(_emitted_alone(op, last, {e}, jax_eqns) for e in got))
        elif not files:
            ok = _emitted_alone(op, last, got, jax_eqns)
        else:
            ok = _at_user_line(got, files, jax_eqns)
        if not ok:
            problems.append(f"line {line}: {op.name} at {last!r} attributed to {sorted(prims)}")
    return problems


def _at_user_line(got, files, jax_eqns) -> bool:
    """Whether the user source line of one of the equations `got` is among the op's location's `files`."""
    user_lines = set()
    for e in got:
        frame = _user_frame(jax_eqns[e].source_info)
        if frame is not None:
            user_lines.add((frame.file_name, frame.start_line))
    return bool(user_lines & files)


def _inside(eqn: int, containers: set[int], eqns: list[dict]) -> bool:
    """Whether equation `eqn` is one of `containers` or sits, at any depth, inside one of them."""
    while eqn is not None:
        if eqn in containers:
            return True
        eqn = eqns[eqn]["parent"]
    return False
