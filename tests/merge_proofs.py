"""What the jaxpr (re-traced by JAX) must show for XLA to have merged an equation into an instruction tagged
with another: docs/corpus.md's rules 2 and 3, read from JAX's own variables, not from the attribution."""
from __future__ import annotations


def _readers(facts, e) -> set[int]:
    """The equations reading an output of `e` in JAX's jaxpr, looking through a stop_gradient (rule 2)."""
    outs = set(map(id, facts.jax_eqns[e].outvars))
    found = set()
    for n, eqn in facts.jax_eqns.items():
        if any(id(v) in outs for v in eqn.invars):
            found |= _readers(facts, n) if eqn.primitive.name == "stop_gradient" else {n}
    return found


class Work:
    """Which equations do the same work by JAX's own variables (rule 3's relation): one primitive and params
    (a slice compared by what it selects from an iota, computed by JAX) on inputs that are the same value,
    a jit's or checkpoint's binders standing for what its caller passes."""

    def __init__(self, facts):
        from dumpgym.jax_internals import jaxprs_in_params

        self.facts = facts
        self.outer = {}  # id(binder of a sub-jaxpr taking its caller's inputs one for one) -> the caller's var
        self.made_by = {}  # id(var) -> the equation id whose output it is
        for n, eqn in facts.jax_eqns.items():
            for v in eqn.outvars:
                self.made_by[id(v)] = n
            if eqn.primitive.name in ("scan", "while"):
                continue  # a loop body's binders are a new value each iteration
            for sub in jaxprs_in_params(eqn.params):
                if len(sub.invars) == len(eqn.invars):
                    for inner, outer in zip(sub.invars, eqn.invars):
                        self.outer[id(inner)] = outer

    def _origin(self, v):
        while id(v) in self.outer:
            v = self.outer[id(v)]
        return v

    def same_value(self, u, v) -> bool:
        if hasattr(u, "val") or hasattr(v, "val"):
            return hasattr(u, "val") and hasattr(v, "val") and repr(u.val) == repr(v.val)
        u, v = self._origin(u), self._origin(v)
        if u is v:
            return True
        a, b = self.made_by.get(id(u)), self.made_by.get(id(v))
        return a is not None and b is not None and self.same(a, b)

    def same(self, a: int, b: int) -> bool:
        import numpy as np

        ea, eb = self.facts.jax_eqns[a], self.facts.jax_eqns[b]
        if ea.primitive is not eb.primitive or len(ea.invars) != len(eb.invars):
            return False
        if ea.primitive.name == "slice":
            shape = ea.invars[0].aval.shape
            if shape != eb.invars[0].aval.shape:
                return False
            x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
            picked = [np.asarray(e.primitive.bind(x, **e.params)) for e in (ea, eb)]
            if picked[0].shape != picked[1].shape or not np.array_equal(*picked):
                return False
        elif ea.params != eb.params:
            return False
        return all(self.same_value(u, v) for u, v in zip(ea.invars, eb.invars))


def proven_merged(facts, work, e: int, listed: set[int], tag: int, rule: int | None = None) -> bool:
    """Whether the jaxpr proves `e` merged into an instruction tagged `tag`: its result is read only by the
    tagged equation (rule 2), or it repeats the work of another listed equation (rule 3); with `rule`, by
    that rule alone."""
    if rule in (None, 2) and _readers(facts, e) == {tag}:
        return True
    return rule in (None, 3) and any(f != e and work.same(e, f) for f in listed)


def proven_reduction_window(facts, got: set[int], tag: int) -> bool:
    """Rule 4: a reduce-window tagged with an equation it cannot compute (`sub`) computes instead one
    reduction and what stands between it and that equation: exactly one reduction among `got`, each other
    equation of `got` reads it through `got` alone, and the tagged equation reads one of them (JAX's own
    variables: `_readers`, which looks through `stop_gradient`)."""
    reductions = [e for e in got if facts.eqns[e].primitive.startswith("reduce_")]
    if len(reductions) != 1 or tag in got:
        return False
    (r,) = reductions
    reached, stack = {r}, [r]
    while stack:
        for n in _readers(facts, stack.pop()):
            if n in got and n not in reached:
                reached.add(n)
                stack.append(n)
    return reached == got and any(tag in _readers(facts, e) for e in got)
