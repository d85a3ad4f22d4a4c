"""What compiled HLO opcodes do in JAX's terms: which primitives an opcode can compute, which only move data.

Opcodes are spelled as the record spells them (XLA's enum, lowercase, no dashes: `dynamicslice`). Shared by the
compile stage (`compiled/attribution.py`, which infers equations from them) and the fusion drill (which ranks
the instructions that compute an equation), so neither reads the other.
"""
from __future__ import annotations

# Ops that only move or replicate data: with no equation of their own kind nearby, they serve
# the one equation they feed (a transpose laying out a dot's operand, a broadcast of its input).
DATA_MOVEMENT = frozenset({
    "transpose", "broadcast", "reshape", "slice", "dynamicslice", "pad", "concatenate", "reverse", "iota",
})
# Which primitives an opcode can compute, where the names differ (else the opcode's own name).
_PRIMITIVES_OF = {
    "dot": {"dot_general"}, "convolution": {"conv_general_dilated"},
    "convert": {"convert_element_type"}, "broadcast": {"broadcast_in_dim"},
    "reshape": {"reshape", "squeeze", "expand_dims", "broadcast_in_dim"},
    "add": {"add", "add_any"}, "subtract": {"sub"}, "multiply": {"mul", "integer_pow", "square"},
    "divide": {"div"}, "maximum": {"max"}, "minimum": {"min"}, "negate": {"neg"},
    "exponential": {"exp", "exp2"}, "exponentialminusone": {"expm1"}, "logplusone": {"log1p"},
    "compare": {"eq", "ne", "lt", "le", "gt", "ge"}, "select": {"select_n"},
    "reduce": {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
               "argmax", "argmin"},
    "dynamicslice": {"dynamic_slice"}, "dynamicupdateslice": {"dynamic_update_slice"},
    "reverse": {"rev"}, "power": {"pow"}, "roundnearestafz": {"round"}, "roundnearesteven": {"round"},
    "allreduce": {"psum", "psum_invariant"}, "scatter": {"scatter", "scatter_add", "scatter-add"},
    # XLA may split a long reduction into a windowed reduce and a short one (embed-xent's row max).
    "reducewindow": {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                     "argmax", "argmin", "reduce_window_sum", "reduce_window_max", "reduce_window_min"},
}


def computes(opcode: str, primitive: str) -> bool:
    """Whether an instruction of this opcode can be (part of) an equation of this primitive."""
    return primitive in _PRIMITIVES_OF.get(opcode, {opcode})
