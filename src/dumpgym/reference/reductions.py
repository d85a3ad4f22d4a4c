"""Cards for reductions: ops that fold an axis away, or fold along it as they go."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("reduce_sum", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         words=("sum", "jnp.sum", "mean"),
         what="Sums an array over the axes listed in `axes`, removing them from the shape.",
         looks="`x:f32[64] = reduce_sum[axes=(1,) out_sharding=None] w`; `axes` names the axes "
               "that vanish, and `out_sharding` stays None unless explicit sharding set one.",
         misread="`keepdims=True` is not a param: the size-1 axis comes back through a separate "
                 "broadcast_in_dim (or reshape) right after, so the reduce itself always drops the "
                 "axis."),
    Card("reduce_max", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         words=("jnp.max", "amax", "softmax"),
         what="Takes the maximum over the axes in `axes`, dropping them from the shape.",
         looks="`q:bf16[128] = reduce_max[axes=(1,)] m`; unlike reduce_sum it prints only `axes`.",
         misread="Its gradient is not a one-hot of the argmax: JAX splits the cotangent evenly "
                 "among tied maxima, which is the eq, convert_element_type, reduce_sum and div "
                 "pattern in the grads dump."),
    Card("reduce_min", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         words=("jnp.min", "amin"),
         what="Takes the minimum over the axes in `axes`.",
         looks="`b:f32[16] = reduce_min[axes=(0,)] a`, lowered to a stablehlo.reduce that applies "
               "minimum from an init of +inf.",
         misread="`jnp.min(x, initial=...)` adds an elementwise min after the reduce; the reduce "
                 "itself never sees the initial value."),
    Card("reduce_prod", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         what="Multiplies the elements along the axes in `axes`.",
         looks="`b = reduce_prod[axes=(0,)] a`; it becomes a stablehlo.reduce whose body "
               "multiplies, starting from 1.",
         misread="A product over an empty axis is 1 (the init value) rather than an error, and an "
                 "integer product wraps silently on overflow."),
    Card("reduce_and", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         what="Returns true where every element along `axes` is true; `jnp.all` lands here.",
         looks="`h:bool[] = reduce_and[axes=(0,)] g`, lowered to a stablehlo.reduce with an `and` "
               "body and an init of true.",
         misread="`jnp.all` on a float array first casts it with "
                 "`convert_element_type[new_dtype=bool]`, so the reduce only ever sees bools and "
                 "any nonzero counts as true."),
    Card("reduce_or", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         what="Returns true where any element along `axes` is true; `jnp.any` lands here.",
         looks="`b:bool[16] = reduce_or[axes=(0,)] a`, with an init of false in the lowered "
               "reduce.",
         misread="It is not the elementwise or: only reduce_or has `axes` and an outvar of lower "
                 "rank."),
    Card("argmax", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         words=("jnp.argmax",),
         what="Returns the index of the largest element along one axis, as an integer array of "
              "`index_dtype`.",
         looks="`d:i32[64] = argmax[axes=(1,) index_dtype=int32] b`; `axes` always holds exactly "
               "one axis.",
         misread="In StableHLO it is not one op: it becomes a call to a private `@argmax` holding "
                 "a two-operand stablehlo.reduce over values and iota indices, whose body breaks "
                 "ties toward the lower index and lets NaN win."),
    Card("argmin", "jaxpr", "reduction", pairs=("stablehlo.reduce",),
         words=("jnp.argmin",),
         what="Returns the index of the smallest element along one axis.",
         looks="`b:i32[8] = argmin[axes=(1,) index_dtype=int32] a`, lowered like argmax into a "
               "private `@argmin` function.",
         misread="Ties go to the lowest index and a NaN counts as the minimum, so argmin of data "
                 "containing NaN points at the NaN."),
    Card("cumsum", "jaxpr", "reduction", pairs=("stablehlo.reduce_window",),
         words=("cumulative sum", "prefix sum"),
         what="Computes a running sum along one axis (`jnp.cumsum`), each output holding the total "
              "of the elements up to and including it.",
         looks="`b = cumsum[axis=1 reverse=False] a`, wrapped in `jit[name=cumsum]`; it lowers to "
               "a stablehlo.reduce_window whose window spans the whole axis, padded on the low "
               "side.",
         misread="It is not `lax.associative_scan`: the scan program in this corpus unrolls into "
                 "slices, pads and adds, while jnp.cumsum keeps its own primitive (with a separate "
                 "lowering on GPU)."),
    # --- StableHLO ---
    Card("stablehlo.reduce", "stablehlo", "reduction",
         pairs=("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                "argmax", "argmin"),
         what="Folds one or more tensors along `dimensions` with a combiner region, starting from "
              "init values. Every reduce_* primitive, argmax and argmin lower to it.",
         looks="Short form: `stablehlo.reduce(%0 init: %cst) applies stablehlo.add across "
               "dimensions = [1]`; a multi-operand reduce prints a `reducer(...)` block instead, "
               "as argmax does.",
         misread="The init constant carries meaning (0 for sums, −inf as `0xFF800000` in f32 or "
                 "`0xFF80` in bf16 for max), and the reduced dimensions are gone from the result "
                 "type, which is why a broadcast_in_dim follows."),
    Card("stablehlo.reduce_window", "stablehlo", "reduction", pairs=("cumsum",),
         what="Applies a reduction over sliding windows of a tensor, described by window "
              "dimensions, strides, padding and dilations.",
         looks="`\"stablehlo.reduce_window\"(%arg0, %0) <{padding = dense<[[0, 0], [15, 0]]> ..., "
               "window_dimensions = array<i64: 1, 16>, ...}>` with an add region is a cumsum along "
               "an axis of 16.",
         misread="It is also what max-pooling lowers to, so read the region and the window before "
                 "naming it; and XLA recognises the cumulative-sum pattern and rewrites it, so it "
                 "does not cost one full window per output."),
)
