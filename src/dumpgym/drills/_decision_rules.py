"""The decisions drill's rule table: for each kind, the equations that show it, its lookalikes, and the sentences.

Each kind in `decision_rules` says which equations show the decision (a predicate over the
facts), which look like it but are not it (with the sentence that says why), and which StableHLO
ops carry it. It registers decision kinds, not drill kinds.
"""
from __future__ import annotations

import functools
import io
import tokenize
from dataclasses import dataclass
from typing import Callable

from dumpgym.drills._avals import axis_list, bits, is_float, short
from dumpgym.drills._program_index import ProgramIndex
from dumpgym.record.primitives import COLLECTIVE_REDUCTIONS, COLLECTIVES, COMPARISONS, REDUCTIONS, REMATS
from dumpgym.record.schema import EqnFact, Literal

# What in a program's own source makes JAX write transposes the user did not: autodiff transposes
# every dot_general (and every `.T`) of the forward pass; einsum reorders dot_general's output.
AUTODIFF = frozenset({"grad", "value_and_grad", "vjp", "jacrev", "jacfwd", "linear_transpose", "hessian"})
# Ways a source spells a transpose; `NAME.T` on a parameter is the only one that cannot be a
# transposed product, so it is the only spelling that leaves dot_general's transposes unambiguous.
TRANSPOSE_CALLS = frozenset({"transpose", "swapaxes", "moveaxis", "permute_dims"})


@dataclass(frozen=True)
class SourceWords:
    """What a program's source says, read from Python's own tokens (comments and strings are not code): the
    names it uses, how it spells transposes (`k.T`, `transpose(`), and its first function's parameters."""

    names: frozenset[str]
    spelled: tuple[str, ...]
    parameters: frozenset[str]

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def of(source: str) -> SourceWords:
        tokens = _tokens(source)
        names = frozenset(t.string for t in tokens if t.type == tokenize.NAME)
        spelled = []
        for k, t in enumerate(tokens):
            after = tokens[k + 1] if k + 1 < len(tokens) else None
            if t.type == tokenize.NAME and t.string in TRANSPOSE_CALLS and after and after.string == "(" \
                    and after.start == t.end:
                spelled.append(t.string + "(")
            elif t.string in ("T", "mT") and k and tokens[k - 1].string == "." and tokens[k - 1].end == t.start:
                line, at = t.line, tokens[k - 1].start[1]
                start = at
                while start and (line[start - 1].isalnum() or line[start - 1] in "_)]"):
                    start -= 1
                if start < at:
                    spelled.append(line[start:at] + "." + t.string)
        return SourceWords(names, tuple(spelled), _parameters(tokens))


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    """Python's tokens of `source`, as far as it reads (a snippet may end inside a bracket)."""
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(source).readline):
            out.append(t)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _parameters(tokens: list[tokenize.TokenInfo]) -> frozenset[str]:
    """The parameter names of the first `def` (`*args`, `**kw` and annotated ones included)."""
    start = next((k for k, t in enumerate(tokens[:-2]) if t.string == "def" and tokens[k + 2].string == "("), None)
    if start is None:
        return frozenset()
    out, depth, expect = set(), 0, True
    for t in tokens[start + 3:]:
        if t.string in "([{" and t.type == tokenize.OP:
            depth += 1
        elif t.string in ")]}" and t.type == tokenize.OP:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and t.string == ",":
            expect = True
        elif depth == 0 and expect and t.type == tokenize.NAME:
            out.add(t.string)
            expect = False
    return frozenset(out)


@dataclass(frozen=True)
class Decision:
    """How to find one kind of framework decision and tell it from what only looks like it."""

    kind: str
    asks: str
    noun: str
    picks: Callable[[EqnFact, ProgramIndex], bool]
    explain: Callable[[EqnFact, ProgramIndex], str]
    # Primitives a reader could take for this kind; those `picks` refuses get `why_not`'s sentence.
    lookalikes: frozenset[str]
    why_not: Callable[[EqnFact, ProgramIndex], str]
    hlo_ops: frozenset[str]
    # True when the op name alone is not enough (a convert is not always an upcast): the
    # x-ray must trace the StableHLO line to an equation that `picks` accepts.
    hlo_owned: bool
    # How often the page asks it: broadcasts and upcasts are in nearly every program, so they are
    # weighted down and the rare kinds up, keeping the common two at most half the pool.
    weight: float
    hlo_note: str = ""


decision_rules: dict[str, Decision] = {}


def decision(kind: str, asks: str, noun: str, *, hlo_ops: set[str], hlo_owned: bool, explain: Callable,
             weight: float, lookalikes: set[str] = frozenset(), why_not: Callable | None = None, hlo_note: str = ""):
    """Register a predicate over equations as the decision kind `kind`."""
    def register(picks: Callable[[EqnFact, ProgramIndex], bool]):
        decision_rules[kind] = Decision(kind, asks, noun, picks, explain, frozenset(lookalikes),
                                        why_not or (lambda e, pf: ""), frozenset(hlo_ops), hlo_owned, weight, hlo_note)
        return picks
    return register


def _inside(eqn: EqnFact, pf: ProgramIndex) -> str:
    parent = pf.by_id(eqn.parent)
    if parent is None:
        return ""
    name = parent.param("name")
    return f" It sits inside `{parent.primitive}`" + (f" (`{name}`)." if isinstance(name, str) else ".")


def _explain_broadcast(eqn: EqnFact, pf: ProgramIndex) -> str:
    out = eqn.outputs[0] if eqn.outputs else None
    x = eqn.inputs[0] if eqn.inputs else None
    dims = eqn.ints("broadcast_dimensions")
    if eqn.primitive != "broadcast_in_dim" or out is None or x is None or dims is None:
        return (f"the jaxpr's `{eqn.primitive}` takes a scalar or size-1 operand as it is; StableHLO wants equal "
                "shapes, so lowering writes the broadcast out.")
    k, r = len(dims), out.rank
    new = [d for i, d in enumerate(out.shape) if i not in dims]
    if isinstance(x, Literal):
        what = (f"The literal {x.literal} is filled out to {out}: how jnp.ones, jnp.full or a scalar "
                "in where are spelled.")
    elif x.rank == 0:
        what = f"A scalar is spread to {out}, as jnp.where or an elementwise op with a scalar operand needs."
    elif tuple(dims) == tuple(range(k)) and set(new) == {1}:
        what = (f"{x} gets a trailing size-1 axis ({out}), from keepdims=True or x[:, None], "
                "so it lines up against the full rows.")
    elif tuple(dims) == tuple(range(r - k, r)) and set(new) == {1}:
        what = (f"NumPy rank promotion: the {x} operand of an elementwise op (a bias or a scale) gets a "
                f"leading size-1 axis ({out}) to line up with the bigger operand's trailing axes.")
    else:
        what = f"broadcast_dimensions={axis_list(dims)} places {x}'s axes inside {out}."
    return f"jnp wrote this broadcast_in_dim, not your source. {what}{_inside(eqn, pf)}"


def _not_broadcast(eqn: EqnFact, pf: ProgramIndex) -> str:
    return (f"is a `reshape` ({eqn.input_avals[0]} to {eqn.outputs[0]}): it regroups the same elements and "
            "copies none, so it is not a broadcast")


def _accumulator(eqn: EqnFact, pf: ProgramIndex) -> EqnFact | None:
    """The reduction in the same jaxpr that reads `eqn`'s output (by the record's `sources`), or None."""
    return next((e for e in pf.siblings_after(eqn) if e.primitive in REDUCTIONS
                 and any(s is not None and s.eqn == eqn.id and s.index == 0 for s in e.sources)), None)


def _explain_upcast(eqn: EqnFact, pf: ProgramIndex) -> str:
    src, out = eqn.input_avals[0], eqn.outputs[0]
    then = _accumulator(eqn, pf)
    follow = f"; the {then.primitive} on {pf.cite(then.jaxpr_lines[0])} then adds up in {short(out.dtype)}" if then else ""
    return (f"convert_element_type widens {src} to {out}{follow}. jnp's sums, means and variances of 16-bit "
            f"floats accumulate in f32 so rounding does not pile up.{_inside(eqn, pf)}")


def _not_upcast(eqn: EqnFact, pf: ProgramIndex) -> str:
    src, out = eqn.input_avals[0].dtype, eqn.outputs[0].dtype
    if is_float(src) and is_float(out) and bits(out) > bits(src):
        return (f"is a `convert_element_type` from {short(src)} to {short(out)} that no reduction reads: a cast "
                "your own code asked for (an astype), not jnp widening a sum to accumulate")
    if is_float(src) and is_float(out):
        return f"is a `convert_element_type` from {short(src)} to {short(out)}: it narrows back, it does not widen"
    return (f"is a `convert_element_type` from {short(src)} to {short(out)}: a change of kind (bool, integer, float), "
            "not a float widened to accumulate")


def _explain_remat(eqn: EqnFact, pf: ProgramIndex) -> str:
    policy = eqn.param("policy")
    saves = "saves nothing" if policy in (None, "None") else f"saves what policy={policy} allows"
    return (f"jax.checkpoint wrote `{eqn.primitive}` around the region; it {saves}, so the backward pass "
            "recomputes the inner equations instead of keeping their outputs in memory.")


def _explain_collective(eqn: EqnFact, pf: ProgramIndex) -> str:
    axes = eqn.param("axes") if "axes" in eqn.params else eqn.param("axis_name")
    names = ", ".join(map(str, axes)) if isinstance(axes, list) else axes
    over = f" over mesh axis {names}" if names else ""
    if eqn.primitive in COLLECTIVE_REDUCTIONS:
        return (f"`{eqn.primitive}`{over} combines every device's partial result element by element; "
                "StableHLO spells it as an all_reduce.")
    return f"`{eqn.primitive}`{over} moves data between devices: a collective the single-device code never needs."


def _mask_compare(eqn: EqnFact, pf: ProgramIndex) -> EqnFact | None:
    if not eqn.outputs:
        return None
    out = eqn.outputs[0]
    return next((e for e in pf.siblings_after(eqn) if e.primitive in COMPARISONS and e.outputs
                 and e.outputs[0].dtype == "bool" and any(x.same(out) for x in e.arrays)), None)


def _explain_iota(eqn: EqnFact, pf: ProgramIndex) -> str:
    cmp = _mask_compare(eqn, pf)
    dim = eqn.param("dimension")
    where = f"the `{cmp.primitive}` on {pf.cite(cmp.jaxpr_lines[0])}" if cmp else "a comparison"
    return (f"iota numbers the positions along axis {dim} of {eqn.outputs[0]}; {where} turns those numbers "
            f"into a boolean mask, which is how tril, one_hot and causal masks are built.{_inside(eqn, pf)}")


def _not_iota_mask(eqn: EqnFact, pf: ProgramIndex) -> str:
    return "is an `iota` that no comparison turns into a mask in the same jaxpr"


def transpose_author(eqn: EqnFact, pf: ProgramIndex) -> str:
    """Who wrote a transpose: "autodiff", "einsum", "user", or "unsure" (then no item asks about it). Without
    the program's source (a dump's record), only the name stacks speak: a transpose of a product (a dot's, or a
    transpose's) in the backward pass is autodiff's; of any other, no one can say."""
    source = pf.record.source
    if not source:
        made_by = pf.producer(eqn)
        by_autodiff = made_by is not None and made_by.primitive in ("dot_general", "transpose")
        return "autodiff" if by_autodiff and pf.record.in_backward(eqn) else "unsure"
    words = SourceWords.of(source)
    autodiff, einsum = bool(AUTODIFF & words.names), "einsum" in words.names
    params, spelled = words.parameters, words.spelled
    # Every spelling transposes a parameter: then no spelled transpose can stand after a dot_general.
    only_params = all(s.endswith(".T") and s[:-2] in params for s in spelled)
    made_by = pf.producer(eqn)
    if made_by is not None and made_by.primitive == "dot_general" and only_params:
        if autodiff:
            return "autodiff"
        if einsum:
            return "einsum"
    if made_by is not None and made_by.primitive == "transpose" and autodiff and only_params:
        return "autodiff"  # the backward pass of a `.T` is a transpose by the inverse permutation
    if made_by is None and not einsum and (spelled or autodiff or not source):
        return "user"
    return "unsure"


def _explain_transpose(eqn: EqnFact, pf: ProgramIndex) -> str:
    src, out = eqn.input_avals[0], eqn.outputs[0]
    perm = eqn.ints("permutation") or ()
    made_by = pf.producer(eqn)
    line = made_by.jaxpr_lines[0] if made_by else 0
    if transpose_author(eqn, pf) == "einsum":
        why = (f"the einsum's output spec asks for an axis order that the dot_general on {pf.cite(line)} does not "
               "produce (it yields batch axes, then lhs's free axes, then rhs's), so jnp appends this transpose")
    elif made_by is not None and made_by.primitive == "transpose":
        why = (f"it is the backward pass of a `.T`: autodiff transposes the cotangent of {pf.cite(line)} back by the "
               "inverse permutation")
    else:
        why = (f"it belongs to the backward pass: autodiff's rule for a matmul computes the gradient with the "
               f"dot_general on {pf.cite(line)} and then reorders its axes to the operand's shape")
    return f"transpose[permutation={axis_list(perm)}] turns {src} into {out}: {why}.{_inside(eqn, pf)}"


def _not_framework_transpose(eqn: EqnFact, pf: ProgramIndex) -> str:
    if transpose_author(eqn, pf) == "user":
        spelled = sorted(set(SourceWords.of(pf.record.source).spelled))
        where = (f"from `{spelled[0]}`" if len(spelled) == 1 else
                 "from one of " + ", ".join(f"`{s}`" for s in spelled) if spelled else
                 "a `.T` in the code your function calls")
        return f"is your own `transpose` ({where}): it transposes a value your code named"
    return "is a `transpose` your source may have spelled itself, so this drill does not count it"


@decision("hidden-broadcast", "makes a hidden broadcast explicit", "a broadcast the framework wrote",
          hlo_ops={"stablehlo.broadcast_in_dim"}, hlo_owned=False, explain=_explain_broadcast, weight=0.4,
          lookalikes={"reshape"}, why_not=_not_broadcast)
def _hidden_broadcast(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive == "broadcast_in_dim"


@decision("upcast", "upcasts to a wider float to accumulate", "an upcast the framework wrote",
          hlo_ops={"stablehlo.convert"}, hlo_owned=True, explain=_explain_upcast, weight=0.4,
          lookalikes={"convert_element_type"}, why_not=_not_upcast)
def _upcast(eqn: EqnFact, pf: ProgramIndex) -> bool:
    if eqn.primitive != "convert_element_type" or not eqn.arrays or len(eqn.outputs) != 1:
        return False
    src, out = eqn.arrays[0].dtype, eqn.outputs[0].dtype
    # jnp widens a 16-bit float for a sum, mean or variance, which reads it; a widening nothing reduces is
    # the user's own astype (pallas-matmul's), not the framework's decision.
    return is_float(src) and is_float(out) and bits(out) > bits(src) and _accumulator(eqn, pf) is not None


@decision("remat", "marks a region to be recomputed in the backward pass", "a remat mark",
          hlo_ops={"stablehlo.optimization_barrier"}, hlo_owned=True, explain=_explain_remat, weight=2.0,
          hlo_note=" The optimization_barrier keeps XLA from reusing the forward pass's values, "
          "which is what forces the recomputation.")
def _remat(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive in REMATS


@decision("collective", "inserts a collective (communication between devices)", "a collective",
          hlo_ops={"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
                   "stablehlo.collective_permute", "stablehlo.reduce_scatter", "stablehlo.collective_broadcast"},
          hlo_owned=False, explain=_explain_collective, weight=2.0)
def _collective(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive in COLLECTIVES


@decision("iota-mask", "starts building a mask from iota", "an iota that starts a mask",
          hlo_ops={"stablehlo.iota"}, hlo_owned=True, explain=_explain_iota, weight=1.5,
          lookalikes={"iota"}, why_not=_not_iota_mask)
def _iota_mask(eqn: EqnFact, pf: ProgramIndex) -> bool:
    # An iota counts as a mask's start when a comparison later in the same jaxpr takes an
    # operand of exactly its aval and yields bool.
    return eqn.primitive == "iota" and _mask_compare(eqn, pf) is not None


@decision("transpose", "inserts a transpose you did not write", "a transpose the framework wrote",
          hlo_ops={"stablehlo.transpose"}, hlo_owned=True, explain=_explain_transpose, weight=1.5,
          lookalikes={"transpose"}, why_not=_not_framework_transpose)
def _transpose(eqn: EqnFact, pf: ProgramIndex) -> bool:
    return eqn.primitive == "transpose" and transpose_author(eqn, pf) in ("autodiff", "einsum")
