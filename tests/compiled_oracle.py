"""An attribution of compiled instructions made independently of `compiled/attribution.py`: XLA's own.

The program's jaxpr, with each equation's tag pushed onto its name stack (the trace stage's tagged
lowering, which `tests/xray_oracle.py` holds to JAX's locations), is compiled for the target by XLA
itself. XLA writes each instruction's `op_name` from the name stack of the op it made the instruction
from, so the innermost tag in an `op_name` names the equation whose op XLA was compiling. That compile
is paired instruction by instruction with the compile the compiled layer read (same computations, same
opcodes, in the same order: the tags ride in names in one and in source files in the other, nothing
else differs), and each instruction the oracle tags is judged against the layer's row:

- **exact**: the row lists that equation and no other;
- **merge**: the row lists that equation and others, each of which a rule of docs/xray.md accounts
  for, proven here from JAX's jaxpr (`merge_rule`);
- **region**: the instruction is in a region applied with `to_apply=` (a reducer's combiner), whose
  instructions compute what applies them (docs/xray.md): the row lists what its holders list;
- **window**: a reduce-window tagged with the equation that reads a reduction's broadcast result;
- **constant inside the call**: a constant (or its broadcast) the oracle names a call by, which the layer
  credits to an equation inside that call whose ops read it: XLA keeps one constant for a literal of the
  call's body and an equal one of a function the body calls, named after the call (docs/xray.md);
- **wrong**: anything else.

A fusion must list every equation the oracle tags a `dot` or `convolution` of its body with (`missed`).
Nothing here reads the layer's `via` or calls the attribution's code.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from unittest import mock

_TAG = re.compile(r"dgeqn(\d+)")
_OP_NAME = re.compile(r'metadata=\{[^}]*?op_name="((?:[^"\\]|\\.)*)"')
_CALLS = re.compile(r"\b(calls|to_apply)=(\{[^}]*\}|%[\w.\-]+)")
_CONTRACTING_OPCODES = frozenset({"dot", "convolution"})
# What moves or names values without computing any equation's work (a dot's tag on the copy laying out its operand).
_SERVING = frozenset({"parameter", "constant", "bitcast", "copy", "tuple", "gettupleelement"})


def oracle_tag(printed: str) -> int | None:
    """The innermost equation tag in an instruction's op_name, as XLA printed it; None if it has none."""
    found = _OP_NAME.search(printed)
    tags = _TAG.findall(found.group(1)) if found else []
    return int(tags[-1]) if tags else None


def _called(printed: str) -> tuple[list[str], list[str]]:
    """The computations an instruction calls as a body (`calls=`) and applies as a region (`to_apply=`)."""
    bodies, regions = [], []
    for kind, names in _CALLS.findall(printed.split(", metadata={")[0]):
        found = [n.strip().lstrip("%") for n in names.strip("{}").split(",") if n.strip()]
        (bodies if kind == "calls" else regions).extend(found)
    return bodies, regions


def tagged_compile(traced, target):
    """XLA's compile of the program for `target` with each equation's tag in its name stack."""
    if target.platform == "cpu":
        return traced.lowered.compile()
    import jax
    from jax.extend import core as jex

    from dumpgym.jax_internals import lower_with_jaxpr, with_source_info
    from dumpgym.traced.devices import retarget, topology_devices
    from dumpgym.traced.trace import map_jaxpr_eqns

    from dumpgym.compiled.layer import devices_needed  # which topology: the layer's choice, not its attribution

    devices = topology_devices(target.topology_for(devices_needed(traced)))
    memo: dict = {}
    tag_of = {id(eqn): k for k, eqn in enumerate(traced.tagged_eqns)}

    def tagged_eqn(eqn, params):
        return with_source_info(eqn, {k: retarget(v, devices, memo) for k, v in params.items()},
                                name=f"dgeqn{tag_of[id(eqn)]}", traceback=None)

    closed = traced.closed_jaxpr
    with jax.default_device(devices[0]):
        lowered = lower_with_jaxpr(traced.jax_traced,
                                   jex.ClosedJaxpr(map_jaxpr_eqns(closed.jaxpr, tagged_eqn), closed.consts),
                                   lambda v: retarget(v, devices, memo))
        return lowered.compile()


def traced_builtin(slug: str):
    """A built-in program's trace and facts, made by JAX here."""
    from dumpgym.programs import builtin_program
    from dumpgym.traced.facts import build_facts
    from dumpgym.traced.trace import trace

    program = builtin_program(slug)
    traced = trace(program.function, program.example_args())
    return traced, build_facts(traced)


def layer_and_module(traced, facts, target):
    """The compiled layer for `target` and the HloModule it was read from (its compile recorded on the way)."""
    from dumpgym.compiled import layer as hlo

    made = []
    name = "_compile_for_cpu" if target.platform == "cpu" else "_compile_for_topology"
    real = getattr(hlo, name)

    def recorded(*a):
        made.append(real(*a))
        return made[-1]

    with mock.patch.object(hlo, name, recorded):
        layer = hlo.compile_layer(traced, facts, target)
    return layer, made[0].compiled.result().runtime_executable().hlo_modules()[0]


def _listed(module):
    return [(c.name, i) for c in module.computations() for i in c.instructions()]


def _opcode(instruction) -> str:
    return str(instruction.opcode).rsplit(".", 1)[-1].lower()


@dataclass
class Judged:
    """One program's compiled layer for one target, judged by the oracle."""

    tagged: int = 0
    kinds: Counter = field(default_factory=Counter)  # exact, merge, region, window, wrong
    wrong: list = field(default_factory=list)  # (instruction, opcode, what the row lists, what the oracle says)
    merges: Counter = field(default_factory=Counter)  # rule -> instructions
    fusions: int = 0
    missed: list = field(default_factory=list)  # (fusion, equations of dots in its body it does not list)
    missed_other: list = field(default_factory=list)  # (fusion, other equations whose work its body does, unlisted)
    unpaired: str = ""  # why the two compiles could not be paired (none of the above is then counted)


def judge_layer(traced, facts, target) -> Judged:
    """The oracle's judgement of the compiled layer `compile_layer` makes for `target`."""
    layer, module = layer_and_module(traced, facts, target)
    oracle = _listed(tagged_compile(traced, target).runtime_executable().hlo_modules()[0])
    ours = _listed(module)
    out = Judged()
    if [(c, _opcode(i)) for c, i in ours] != [(c, _opcode(i)) for c, i in oracle]:
        out.unpaired = "the two compiles differ in computations or opcodes"
        return out
    rows = {row.name: row for row in layer.instructions}
    printed = {mine.name: other.to_string() for (_, mine), (_, other) in zip(ours, oracle)}
    computation = {mine.name: c for c, mine in ours}
    members = defaultdict(list)
    for c, mine in ours:
        members[c].append(mine.name)
    # Which instructions apply each region (`to_apply=`), and what each fusion's body is.
    holders, bodies = defaultdict(list), {}
    for name, text in printed.items():
        called, regions = _called(text)
        for r in regions:
            holders[r].append(name)
        bodies[name] = called + regions
    jaxpr = JaxprRelations(facts)
    for name, text in printed.items():
        row = rows.get(name)
        tag = oracle_tag(text)
        if row is None or tag is None or row.opcode == "fusion":
            continue
        expected = facts.eqn_of_tag[tag]
        listed = set(row.eqns)
        out.tagged += 1
        region = computation[name]
        if listed == {expected}:
            out.kinds["exact"] += 1
        elif region in holders and listed and listed == set().union(
                *(set(rows[h].eqns) for h in holders[region] if h in rows)):
            out.kinds["region"] += 1
        elif expected in listed and all(jaxpr.merge_rule(e, expected) for e in listed - {expected}):
            out.kinds["merge"] += 1
            for e in sorted(listed - {expected}):
                out.merges[jaxpr.merge_rule(e, expected)] += 1
        elif row.opcode == "reducewindow" and jaxpr.window_of(listed, expected):
            out.kinds["window"] += 1
        elif row.opcode in ("constant", "broadcast") and listed and all(jaxpr.inside(e, expected) for e in listed):
            out.kinds["constant inside the call"] += 1
        else:
            out.kinds["wrong"] += 1
            out.wrong.append((name, row.opcode, sorted(listed), expected))
    for name, row in rows.items():
        if row.opcode != "fusion":
            continue
        out.fusions += 1
        dots, others, stack, seen = set(), set(), list(bodies[name]), set()
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            for n in members[c]:
                tag = oracle_tag(printed[n])
                if tag is not None and n in rows and rows[n].opcode in _CONTRACTING_OPCODES:
                    dots.add(facts.eqn_of_tag[tag])
                elif (tag is not None and n in rows and rows[n].opcode not in _SERVING
                      and jaxpr.primitive(facts.eqn_of_tag[tag]) not in ("dot_general", "conv_general_dilated")):
                    others.add(facts.eqn_of_tag[tag])
                stack += bodies[n]
        if dots - set(row.eqns):
            out.missed.append((name, sorted(dots - set(row.eqns))))
        if others - set(row.eqns):
            out.missed_other.append((name, sorted(others - set(row.eqns))))
    return out


class JaxprRelations:
    """What JAX's jaxpr says of two equations, read from the JAX equations themselves (not the layer)."""

    def __init__(self, facts):
        from jax.extend import core as jex

        self.facts = facts
        self.eqns = facts.jax_eqns
        self.readers = defaultdict(set)  # id(var) -> equations reading it
        self.producer = {}  # id(var) -> (equation, output number)
        self.outer = {}  # id(a call body's input var) -> the var the call passes it
        for n, eqn in self.eqns.items():
            for v in eqn.invars:
                if not isinstance(v, jex.Literal):
                    self.readers[id(v)].add(n)
            for k, v in enumerate(eqn.outvars):
                self.producer[id(v)] = (n, k)
            for body in _call_bodies(eqn):
                if len(body.invars) == len(eqn.invars):
                    for inner, outer in zip(body.invars, eqn.invars):
                        self.outer[id(inner)] = outer
        self._same: dict = {}

    def primitive(self, e: int) -> str:
        return self.eqns[e].primitive.name

    def consumers(self, e: int) -> set[int]:
        """The equations reading an output of `e` in its own jaxpr."""
        return set().union(*(self.readers[id(v)] for v in self.eqns[e].outvars))

    def merge_rule(self, e: int, tagged: int) -> str | None:
        """The rule of docs/xray.md by which an instruction tagged `tagged` also does `e`'s work, if one holds."""
        consumers = self.consumers(e)
        # Through stop_gradient, which lowers to nothing.
        while len(consumers) == 1 and self.primitive(next(iter(consumers))) == "stop_gradient":
            consumers = self.consumers(next(iter(consumers)))
        if consumers == {tagged}:
            return "folded into its one consumer"
        if self.same_work(e, tagged):
            return "equal work kept once"
        return None

    def _source(self, v):
        """What a var holds, as XLA sees it: a literal's value, the output of an equation, or an argument
        (through the inputs of calls, which XLA inlines)."""
        from jax.extend import core as jex

        if isinstance(v, jex.Literal):
            return ("literal", repr(v.val), str(v.aval))
        while id(v) in self.outer:
            v = self.outer[id(v)]
        if id(v) in self.producer:
            return ("eqn",) + self.producer[id(v)]
        return ("var", id(v))

    def same_work(self, a: int, b: int) -> bool:
        """Whether two equations do the same work on the same values: the same primitive and params, on
        inputs that are the same values or the results of equations doing the same work."""
        key = (min(a, b), max(a, b))
        if a == b:
            return True
        if key not in self._same:
            self._same[key] = False  # while its inputs are compared
            ea, eb = self.eqns[a], self.eqns[b]
            same = (ea.primitive == eb.primitive and len(ea.invars) == len(eb.invars)
                    and _picked(ea) == _picked(eb))
            for x, y in zip(ea.invars, eb.invars):
                if not same:
                    break
                sx, sy = self._source(x), self._source(y)
                same = sx == sy or (sx[0] == sy[0] == "eqn" and sx[2] == sy[2] and self.same_work(sx[1], sy[1]))
            self._same[key] = same
        return self._same[key]

    def inside(self, e: int, call: int) -> bool:
        """Whether equation `e` lies in the body of the call equation `call` (at any depth)."""
        parent = self.facts.eqns[e].parent
        while parent is not None:
            if parent == call:
                return True
            parent = self.facts.eqns[parent].parent
        return False

    def window_of(self, listed: set[int], tagged: int) -> bool:
        """Whether `listed` is a reduction, and what stands between it and `tagged`, which reads its broadcast."""
        return any(self.primitive(e).startswith("reduce_") for e in listed) and tagged not in listed


def _call_bodies(eqn):
    """The jaxprs a call-like equation inlines with its own inputs (jit, remat, custom_jvp's primal)."""
    from jax.extend import core as jex

    for value in eqn.params.values():
        if isinstance(value, jex.ClosedJaxpr):
            yield value.jaxpr
        elif isinstance(value, jex.Jaxpr):
            yield value


def _picked(eqn) -> str:
    """An equation's params as far as they decide its result (a slice by the elements it picks)."""
    params = dict(eqn.params)
    if eqn.primitive.name == "slice" and params.get("start_indices") is not None:
        strides = params.get("strides") or [1] * len(params["start_indices"])
        picked = [tuple(range(s, l, st))[:1] + (len(range(s, l, st)),)
                  for s, l, st in zip(params["start_indices"], params["limit_indices"], strides)]
        return repr(picked)
    return repr(sorted(params.items(), key=lambda kv: kv[0]))
