"""Named sets of JAX primitives, by what a reader needs to know about them; one set per name.

A primitive's name is the one the jaxpr prints (`reduce_sum`, `psum_invariant`, `remat2`). Whether
an equation holds a sub-jaxpr is not a set here: `record.EqnFact.has_subjaxpr` reads it off the
params, so it also holds for containers this module has never heard of.
"""
from __future__ import annotations

# Remove the axes named by `axes`: the values' reductions and the index-returning ones.
VALUE_REDUCTIONS = frozenset({"reduce_sum", "reduce_prod", "reduce_max", "reduce_min",
                              "reduce_and", "reduce_or", "reduce_xor"})
INDEX_REDUCTIONS = frozenset({"argmax", "argmin"})
REDUCTIONS = VALUE_REDUCTIONS | INDEX_REDUCTIONS

# Elementwise comparisons: operands of one dtype in, bool out.
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})

# Collectives that combine one array across devices element by element, keeping its shape
# (StableHLO spells them all_reduce).
COLLECTIVE_REDUCTIONS = frozenset({"psum", "psum2", "psum_invariant", "pmax", "pmin", "pmean"})
# Every primitive that moves data between devices.
COLLECTIVES = COLLECTIVE_REDUCTIONS | frozenset({
    "all_gather", "all_gather_invariant", "all_to_all", "ppermute", "pshuffle", "psum_scatter",
    "reduce_scatter", "pbroadcast", "pgather",
})

# jax.checkpoint's container, under each name JAX has given it.
REMATS = frozenset({"remat", "remat2", "checkpoint"})

# Math functions whose 16-bit input a reader may expect to come out in f32.
TRANSCENDENTAL = frozenset({"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan",
                            "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "atan2", "pow"})

# Loops and branches: containers whose body runs a number of times, or one of several.
LOOPS = frozenset({"scan", "while", "cond"})

# What says where a value lives across devices, without computing anything.
SHARDING = frozenset({"sharding_constraint", "shard_map", "reshard", "device_put"})
