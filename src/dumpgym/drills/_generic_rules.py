"""Misreadings that fit any equation, and those that turn on where it sits (a shard_map and its mesh).

Generic rules are tried after a primitive's own rules run out. Each still reads the equation at
hand: its operands, its literals, its output's axes.
"""
from __future__ import annotations

from dumpgym.drills._avals import per_device_shape, short, widened
from dumpgym.drills._dot import dot_dims
from dumpgym.drills._shape_feedback import broadcasts
from dumpgym.drills._distractor_rules import GENERIC, WHERE, Found, Where, rule
from dumpgym.record.schema import Aval, EqnFact, Literal


def _operand_slip(eqn: EqnFact, answer: Aval) -> str:
    """What a reader who copies the operand's aval overlooked, in this primitive's own params."""
    p, x = eqn.primitive, eqn.arrays[0]
    axes = eqn.ints("axes")
    if eqn.has_subjaxpr:
        return f"{p}'s result is whatever its inner jaxpr returns"
    if axes is not None and x.rank != answer.rank:
        return f"{p} removes axes {', '.join(map(str, axes))}"
    if p == "dot_general":
        return "the result keeps lhs's free axes and rhs's, not lhs's shape"
    if p == "slice":
        return "the slice keeps only start to limit, every stride-th element"
    if p == "pad":
        return "pad adds each axis's low, high and interior padding"
    if p == "concatenate":
        return f"concatenate adds up the operands' sizes along dimension={eqn.param('dimension')}"
    if p == "transpose":
        return "permutation moves the axes"
    if p == "squeeze":
        return f"squeeze removes the size-1 axes dimensions={eqn.param('dimensions')}"
    if p == "gather":
        return "gather's result takes the indices' batch axes and each slice_sizes window, not the operand's shape"
    if x.shape != answer.shape and all(broadcasts(a, answer) for a in eqn.arrays):
        return f"its size-1 axes stretch to the other operand's sizes, giving {list(answer.shape)}"
    if x.shape != answer.shape:
        return f"{p} gives the shape {list(answer.shape)}, not the operand's"
    return f"{p} gives {short(answer.dtype)}, not {short(x.dtype)}"


@rule(GENERIC)
def operand_unchanged(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Assumed the result is the first operand's aval."""
    if not eqn.arrays:
        return None
    x = eqn.arrays[0]
    return (x, f"copied the first operand's {x}; {_operand_slip(eqn, answer)}")


@rule(GENERIC)
def other_operand(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Took another operand's aval for the result."""
    for k, x in enumerate(eqn.arrays[1:], start=2):
        if not x.same(eqn.arrays[0]):
            if eqn.primitive == "dot_general":
                return x, f"copied rhs's {x}; the result keeps lhs's free axes too"
            if all(broadcasts(a, answer) for a in eqn.arrays) and any(d == 1 and a != 1 for d, a in zip(x.shape, answer.shape)):
                return x, (f"took the size-1 side {x}; its size-1 axes stretch to match the other operand")
            return x, f"copied operand {k}'s {x}; {_operand_slip(eqn, answer)}"
    return None


@rule(WHERE)
def global_shape_in_body(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Inside a shard_map body, read the operands at their global shapes instead of per device."""
    if not where.in_body or not any(where.operands_global):
        return None
    xs = [g or x for g, x in zip(where.operands_global, eqn.input_avals)]
    d = dot_dims(eqn)
    if d is not None:
        free = lambda side, x: [x.shape[i] for i in d.free(side)]  # noqa: E731
        shape = [xs[0].shape[i] for i in d.lhs_batch] + free("lhs", xs[0]) + free("rhs", xs[1])
    elif all(x.rank == answer.rank for x in xs) and not eqn.has_subjaxpr:
        shape = [max(x.shape[i] for x in xs) for i in range(answer.rank)]
    else:
        return None
    per, full = next((x, g) for x, g in zip(eqn.input_avals, where.operands_global) if g is not None)
    return (answer.with_shape(shape),
            f"read the operands at their global shapes ({full} for {per}); inside shard_map each device "
            "holds a per device block, and the result is per device too")


@rule(GENERIC)
def weak_literal_promotion(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Let a Python scalar promote the result, as NumPy would."""
    scalars = [x for x in eqn.inputs if isinstance(x, Literal) or x.weak_type]
    if not scalars:
        return None
    s = scalars[0]
    name = f"the Python scalar {s.literal}" if isinstance(s, Literal) else f"the weakly typed scalar {s}"
    if s.dtype == "bool" and answer.dtype == "bool":
        return (answer.with_dtype("int32"),
                f"read {name} as an int (Python's bool subclasses int); a bool literal stays bool")
    # f32 and i32 would become f64 and i64 only with x64 on, which this corpus never turns on.
    wide = widened(answer.dtype)
    if wide is None:
        return None
    return (answer.with_dtype(wide),
            f"let {name} promote the result to {short(wide)}; weakly typed scalars take the array's "
            f"{short(answer.dtype)}")


@rule(GENERIC)
def transposed_last_two(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Swapped the last two axes, as if reading a transposed layout."""
    if answer.rank < 2 or answer.shape[-1] == answer.shape[-2]:
        return None
    shape = (*answer.shape[:-2], answer.shape[-1], answer.shape[-2])
    return (answer.with_shape(shape),
            "swapped the last two axes, reading rows as columns")


@rule(GENERIC)
def squeezed(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Dropped size-1 axes, as if squeezed."""
    if 1 not in answer.shape:
        return None
    return (answer.with_shape([d for d in answer.shape if d != 1]),
            "dropped the size-1 axis, as if it had been squeezed away")


@rule(GENERIC)
def default_dtype(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Assumed the default f32 (or i32) instead of the narrower dtype in play."""
    wide = widened(answer.dtype)
    if wide is None:
        return None
    return answer.with_dtype(wide), f"assumed JAX's default {wide}; the values here are {short(answer.dtype)}"


@rule(GENERIC)
def scalar_as_vector(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read a scalar `f32[]` as a one-element vector."""
    if answer.rank:
        return None
    return (answer.with_shape([1]),
            f"read the scalar {answer} as a one-element vector; [] means no axes at all")


@rule(GENERIC)
def dropped_leading_axis(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Miscounted the rank and lost the leading axis."""
    if not answer.rank:
        return None
    return (answer.with_shape(answer.shape[1:]),
            f"miscounted the rank and lost the leading axis (size {answer.shape[0]})")


@rule(GENERIC)
def vector_as_column(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Read a vector `[n]` as a column `[n,1]`."""
    if answer.rank != 1:
        return None
    return (answer.with_shape([answer.shape[0], 1]),
            f"wrote the vector {answer} as a column with a trailing size-1 axis")


@rule(GENERIC)
def flattened(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Counted elements instead of listing axes."""
    if answer.rank < 2:
        return None
    size = 1
    for d in answer.shape:
        size *= d
    return (answer.with_shape([size]),
            f"counted elements instead of axes: {'x'.join(map(str, answer.shape))} flattened into one axis")


# -- sharding -----------------------------------------------------------------------------

def _spec_text(spec: list) -> str:
    return "P(" + ", ".join("None" if n is None else repr(n[0]) if len(n) == 1 else repr(n) for n in spec) + ")"


@rule("shard_map")
def per_device_result(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Gave a per-device block where shard_map hands back the global array."""
    out_specs = eqn.partition_specs.get("out_specs")
    if not where.mesh or out_specs is None or len(out_specs) != 1:
        return None
    out = out_specs[0]
    if out is None:
        return None
    shape = per_device_shape(answer.shape, out, where.mesh)
    if shape is not None and shape != answer.shape:
        axis = next(a for a, (g, p) in enumerate(zip(answer.shape, shape)) if g != p)
        k = answer.shape[axis] // shape[axis]
        return (answer.with_shape(shape),
                f"gave the per device block the body returns; out_specs={_spec_text(out)} lays the {k} "
                f"blocks side by side along axis {axis}, so globally it is {shape[axis]} x {k} = {answer.shape[axis]}")
    # A replicated result: the slip is to keep an operand's split.
    for spec in eqn.partition_specs.get("in_specs", ()):
        spec = spec or ()
        for axis, names in enumerate(spec):
            if names and axis < answer.rank:
                split = per_device_shape(answer.shape, [None] * axis + [names], where.mesh)
                if split is not None and split != answer.shape:
                    return (answer.with_shape(split),
                            f"kept axis {axis} split over {names[0]!r} as in_specs={_spec_text(spec)} splits an "
                            f"operand, giving a per device block; out_specs={_spec_text(out)} replicates the "
                            "result, so it is the same per device and globally")
    return None


@rule("shard_map")
def stacked_device_results(eqn: EqnFact, answer: Aval, where: Where) -> Found:
    """Stacked the per-device results of a replicated shard_map output along a new leading stretch."""
    out_specs = eqn.partition_specs.get("out_specs")
    if not where.mesh or out_specs is None or len(out_specs) != 1 or not answer.rank:
        return None
    out = out_specs[0]
    if out is None or any(out):
        return None
    n = 1
    for size in where.mesh.values():
        n *= size
    return (answer.with_shape([answer.shape[0] * n, *answer.shape[1:]]),
            f"stacked the {n} per device results along axis 0; out_specs={_spec_text(out)} says the result is "
            f"replicated: each device holds one copy of the same {answer}")
