"""Cards for ops that read or write at computed positions, and for sorting."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("gather", "jaxpr", "indexing", pairs=("stablehlo.gather",),
         words=("take", "x[idx]", "embedding lookup", "index"),
         what="Reads slices of an operand at positions given by an index array; NumPy-style "
              "integer indexing and `jnp.take_along_axis` become it.",
         looks="`g:f32[4,16] = gather[dimension_numbers=GatherDimensionNumbers(offset_dims=(1,), "
               "collapsed_slice_dims=(0,), start_index_map=(0,), ...) "
               "mode=GatherScatterMode.PROMISE_IN_BOUNDS slice_sizes=(1, 16) ...] a f`; "
               "`slice_sizes` is the block read per index.",
         misread="The lt, add and select_n before it only wrap negative indices; an index past the "
                 "end is not an error, because the read is clamped to a valid position."),
    Card("scatter", "jaxpr", "indexing", pairs=("stablehlo.scatter",),
         words=(".at[].set", "index update"),
         what="Writes update slices into a copy of an operand at given indices, replacing what was "
              "there; `x.at[i].set(v)` becomes it.",
         looks="`c:f32[4] = scatter[dimension_numbers=ScatterDimensionNumbers(...) "
               "mode=GatherScatterMode.FILL_OR_DROP update_jaxpr=None ...] a b 1.0:f32[]`: "
               "operand, indices, then updates.",
         misread="When two indices collide, which update wins is unspecified, and under "
                 "FILL_OR_DROP an out-of-range index silently drops its update."),
    Card("scatter-add", "jaxpr", "indexing", pairs=("stablehlo.scatter",),
         words=(".at[].add", "segment_sum", "index update"),
         what="Adds update slices into a copy of an operand at given indices, accumulating "
              "duplicates; `x.at[i].add(v)` becomes it.",
         looks="`h = scatter-add[...] a f g`, with the combiner printed inline as `update_jaxpr={ "
               "lambda ; i:f32[] j:f32[]. let k:f32[] = add i j in (k,) }`.",
         misread="The hyphen belongs to the primitive's name, and scatter-add is the transpose of "
                 "gather, so a gradient of indexing code contains it even if you never wrote "
                 "`.at[].add`."),
    Card("dynamic_slice", "jaxpr", "indexing", pairs=("stablehlo.dynamic_slice",),
         words=("lax.dynamic_slice", "traced offset"),
         what="Reads a block of static size at start offsets known only at run time.",
         looks="`g:f32[2,16] = dynamic_slice[slice_sizes=(2, 16)] a f 0:i32[]`: the operand, then "
               "one scalar start index per axis as operands; only the sizes are params.",
         misread="The lt, add and select_n feeding its start wrap negative starts; it is the op "
                 "itself that clamps the start so the block stays inside the array, so an "
                 "out-of-range start reads a shifted block rather than failing."),
    Card("dynamic_update_slice", "jaxpr", "indexing", pairs=("stablehlo.dynamic_update_slice",),
         words=("in-place update", ".at[].set", "kv cache"),
         what="Writes a block into a copy of an array at start offsets known only at run time; "
              "`lax.dynamic_update_slice` emits it.",
         looks="`dynamic_update_slice a u s 0:i32[]`: operand, update, then one scalar start per "
               "axis, and no params at all.",
         misread="Inside a loop XLA can usually update the buffer in place, so it is not a full "
                 "copy per iteration even though the op returns a new array."),
    Card("sort", "jaxpr", "indexing", pairs=("stablehlo.sort",),
         words=("argsort", "jnp.sort"),
         what="Sorts along `dimension`, carrying any extra operands along as payload; jnp.sort and "
              "jnp.argsort emit it inside a `jit`.",
         looks="`sort[dimension=1 is_stable=True num_keys=1] a`; argsort passes an iota as a "
               "second operand and keeps only the permuted iota.",
         misread="`num_keys=1` with two operands does not mean two sort keys: only the first "
                 "operand is compared and the second just follows it."),
    Card("top_k", "jaxpr", "indexing", pairs=("chlo.top_k",),
         words=("topk", "lax.top_k"),
         what="Returns the k largest values along `axis` and their indices, largest first.",
         looks="`b:f32[8,3] c:i32[8,3] = top_k[axis=1 k=3] a` has two outvars, values then "
               "indices.",
         misread="chlo.top_k only works on the last dimension, so a top_k over any other axis "
                 "arrives in StableHLO between two transposes."),
    # --- StableHLO ---
    Card("stablehlo.gather", "stablehlo", "indexing", pairs=("gather",),
         what="Gathers slices of an operand at positions read from a start-indices tensor, as "
              "described by its dimension numbers and slice sizes.",
         looks="Printed in generic form: `\"stablehlo.gather\"(%arg0, %5) <{dimension_numbers = "
               "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = "
               "[0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, "
               "16>}>`.",
         misread="`index_vector_dim` says which axis of the indices holds coordinates; the "
                 "`tensor<4x1xi32>` indices here hold one coordinate per row, which is why the "
                 "jaxpr added a trailing size-1 axis first."),
    Card("stablehlo.scatter", "stablehlo", "indexing", pairs=("scatter", "scatter-add"),
         what="Writes or combines update slices into an operand at given indices, merging each "
              "update with the old value through an update region.",
         looks="`\"stablehlo.scatter\"(%arg0, %5, %6) <{scatter_dimension_numbers = "
               "#stablehlo.scatter<...>, ...}> ({ ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>): "
               "... })`: the region names the combiner.",
         misread="A set and an add lower to the same op; only the region tells them apart, since a "
                 "set's region simply returns the update (`stablehlo.return %arg2`)."),
    Card("stablehlo.dynamic_slice", "stablehlo", "indexing", pairs=("dynamic_slice",),
         what="Extracts a block of static `sizes` at start indices given as runtime scalar "
              "operands.",
         looks="`stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 16]`: one scalar start per "
               "dimension after the operand.",
         misread="Inside a lowered scan, a size-1 dynamic_slice on the scanned axis followed by a "
                 "reshape is the per-iteration `xs[i]`, outlined into a function named "
                 "`@dynamic_index_in_dim`."),
    Card("stablehlo.dynamic_update_slice", "stablehlo", "indexing", pairs=("dynamic_update_slice",),
         what="Overwrites a block of a tensor at runtime start indices and returns the updated "
              "tensor.",
         looks="`stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c`: operand, update, then one "
               "start per dimension.",
         misread="In a lowered scan it writes each step's output into the carried stacked buffer, "
                 "in a function named `@dynamic_update_index_in_dim`; it is not an update you "
                 "wrote."),
    Card("stablehlo.sort", "stablehlo", "indexing", pairs=("sort",),
         what="Sorts one or more tensors along `dimension` using a comparator region that returns "
              "i1.",
         looks="`\"stablehlo.sort\"(%arg0) <{dimension = 1 : i64, is_stable = true}> ({ ... "
               "stablehlo.compare LT, %4, %8, TOTALORDER ... })`.",
         misread="The selects before the compare map −0.0 to 0.0 and every NaN to one canonical "
                 "NaN; they are not part of your sort key, and ascending order comes from the LT."),
    Card("chlo.top_k", "stablehlo", "indexing", pairs=("top_k",),
         what="The CHLO op for top-k along the last dimension, returning values and i32 indices.",
         looks="`%values, %indices = chlo.top_k(%arg0, k = 3) : tensor<8x16xf32> -> "
               "(tensor<8x3xf32>, tensor<8x3xi32>)`.",
         misread="CHLO is a higher-level dialect expanded during compilation (often into a sort, "
                 "depending on the backend), so it does not promise a dedicated top-k kernel."),
)
