"""An attribution of compiled instructions computed independently of `compiled/attribution.py`.

XLA compiles, for one target, the lowering the trace stage tags through the name stack (each equation's
tag `dgeqnN` in the op_name of every op it lowers to), the very lowering the layer carries its tags from,
compiled on its own. What XLA writes in each instruction's op_name is then the oracle: the last tag it
holds names the innermost equation whose lowering made the instruction. The compile is paired with the
layer's own (the same computations, the same opcodes in the same order: only names differ) instruction
by instruction, and each layer row is judged against it:

- "exact": the row lists that equation alone;
- "merged": the row lists it and others as its own (the equations XLA folded into it are listed apart, as
  absorbed, and judged by the test against the rule each names);
- "outer": the row lists an equation enclosing it (a jit's or a loop's), not it;
- "inner": the oracle names a container equation (a jit whose body JAX lowered a literal of with no
  location) and the row lists equations inside it;
- "other": anything else (nothing, or an unrelated equation).

Instructions of reducer and comparator regions are left out (XLA keeps one copy of equal regions, tagged
after one of the reducers applying it; the layer gives them their holder's equations, docs/xray.md), and
so are fusion instructions themselves, which are judged by their bodies: every equation that an
instruction of a fusion's body (nested computations too) is tagged with must be among the fusion's,
unless that instruction only moves or lays out data (a bitcast, a copy, a parameter, a constant), its tag
names a container (a jit: no work of its own), or its tag names a contraction and it is no dot,
convolution, kernel or fusion (a transpose or slice laying out a dot's operand).
"""
from __future__ import annotations

from collections import Counter
from unittest import mock

# What moves or lays out data in a fusion's body without doing an equation's work.
_BOOKKEEPING = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy"})
# A contraction's work is a dot or a convolution XLA put in the fusion (or a kernel, or a fusion nested in it):
# the transposes, slices and index arithmetic it tags around one lay out its operands.
_CONTRACTIONS = frozenset({"dot_general", "conv_general_dilated"})
_CONTRACTING = frozenset({"dot", "convolution", "custom-call", "fusion"})


def _instructions(module):
    for computation in module.computations():
        for instruction in computation.instructions():
            yield computation.name, instruction


def _opcode(instruction) -> str:
    text = instruction.to_string()
    head = text.split(" = ", 1)[1] if " = " in text else text
    # `f32[2,3]{1,0} add(...)`: the opcode is the word before the first `(` after the shape
    before = head.split("(", 1)[0].rstrip()
    if before.endswith(")"):  # a tuple shape `(f32[], s32[]) tuple(...)`: skip past the shape's parentheses
        depth, i = 0, 0
        for i, ch in enumerate(head):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and ch == ")":
                break
        before = head[i + 1:].split("(", 1)[0].rstrip()
    return before.rsplit(" ", 1)[-1]


def _op_name(printed: str) -> str:
    at = printed.find('op_name="')
    if at < 0:
        return ""
    i, out = at + len('op_name="'), []
    while printed[i] != '"':
        if printed[i] == "\\":
            i += 1
        out.append(printed[i])
        i += 1
    return "".join(out)


def _last_tag(op_name: str) -> int | None:
    import re

    found = re.findall(r"dgeqn(\d+)", op_name)
    return int(found[-1]) if found else None


def enclosing_eqns(facts, e: int) -> set[int]:
    """The container equations around `e` at any depth, by the jaxpr's own nesting (`Facts.callers`)."""
    out, stack = set(), list(facts.callers.get(e, ()))
    while stack:
        p = stack.pop()
        if p not in out:
            out.add(p)
            stack += facts.callers.get(p, ())
    return out


def fresh_layer_and_oracle(traced, facts, target):
    """The layer `compile_layer` makes for `target` here, the compile it was made from, and XLA's compile
    of the name-stack-tagged lowering the layer carried its tags from, compiled on its own."""
    from dumpgym.compiled import layer as hlo

    made = []
    real = hlo._compile_tagged

    def recorded(own, tagged, *rest):
        # The oracle is compiled first: the layer's compile may take the tagged lowering over (`own`) and
        # move its tags into its locations, after which it is no longer the name-stack-tagged lowering.
        # Compiler options given (none) keep JAX from caching this executable on the lowering, where the
        # layer's own compile of `own` would find it.
        oracle = tagged.compile(compiler_options={})
        made.append((oracle, real(own, tagged, *rest)))
        return made[-1][1]

    with mock.patch.object(hlo, "_compile_tagged", recorded):
        layer = hlo.compile_layer(traced, facts, target)
    ((oracle, (future, _names, _analyses)),) = made
    return layer, future.result(), oracle


def judge(layer, compiled, oracle, facts) -> dict:
    """The layer's rows against the oracle's tags: counts per verdict, the cases that are not exact
    (row name, opcode, oracle equation, row equations, verdict), the fusions missing an equation, and the
    oracle's equation of each row judged (`tagged`). A row's own `eqns` are judged; what it absorbed is not."""
    ours = list(_instructions(compiled.runtime_executable().hlo_modules()[0]))
    theirs = list(_instructions(oracle.runtime_executable().hlo_modules()[0]))
    # The same instructions in the same order: only names differ (they come from the locations).
    assert [_opcode(i) for _c, i in ours] == [_opcode(i) for _c, i in theirs]
    rows_in_order = layer.instructions
    rows = {r.name: r for r in rows_in_order}
    regions = {c for r in rows_in_order for c in r.to_apply} - {c for r in rows_in_order for c in r.calls}
    pairs = [(rows[m.name], t) for (_c, m), (_c2, t) in zip(ours, theirs) if m.name in rows]
    printed_order: dict[str, list] = {}
    for r in rows_in_order:
        printed_order.setdefault(r.computation, []).append(r)
    count = Counter()
    cases = []
    tagged = {}  # row name -> the equation its oracle names, for each row judged
    tag_eqn = facts.eqn_of_tag
    containers = set(facts.children)
    body_tags: dict[str, set[int]] = {}
    for r, i in pairs:
        tag = _last_tag(_op_name(i.to_string()))
        if tag is None or tag not in tag_eqn:
            continue
        own = tag_eqn[tag]
        if r.computation in regions:
            continue
        opcode = _opcode(i)
        if opcode not in _BOOKKEEPING and own not in containers and (
                facts.eqns[own].primitive not in _CONTRACTIONS or opcode in _CONTRACTING):
            body_tags.setdefault(r.computation, set()).add(own)
        if r.opcode == "fusion":
            continue
        got = set(r.eqns)
        tagged[r.name] = own
        if got == {own}:
            verdict = "exact"
        elif own in got:
            verdict = "merged"
        elif got & enclosing_eqns(facts, own):
            verdict = "outer"
        elif got and all(own in enclosing_eqns(facts, e) for e in got):
            verdict = "inner"
        else:
            verdict = "other"
        count[verdict] += 1
        if verdict != "exact":
            cases.append((r.name, r.opcode, own, tuple(sorted(got)), verdict))
    calls = {r.name: r.calls for r in rows_in_order}
    missing = []
    for f in layer.fusions:
        held, stack, seen = set(), list(calls.get(f.name, ())), set()
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            held |= body_tags.get(c, set())
            stack += [x for r in printed_order.get(c, []) for x in (*r.calls, *r.to_apply)]
        lost = held - set(f.eqns)
        if lost:
            missing.append((f.name, tuple(sorted(lost)), tuple(f.eqns)))
    return {"count": count, "cases": cases, "missing": missing, "tagged": tagged}
