"""Cards for ops that move or rearrange data without arithmetic, and for ops that create arrays."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("broadcast_in_dim", "jaxpr", "shape", pairs=("stablehlo.broadcast_in_dim",),
         words=("broadcast", "expand_dims", "newaxis"),
         what="Places an array into a larger shape: `broadcast_dimensions` says which output axis "
              "each input axis becomes, and every other output axis repeats the data.",
         looks="`k:f32[32,1] = broadcast_in_dim[broadcast_dimensions=(0,)] f`, with the target "
               "`shape` hidden and read from the outvar's aval; a scalar broadcast prints bare, as "
               "`broadcast_in_dim 1.0:f32[]`.",
         misread="`jnp.expand_dims` and `keepdims=True` produce this primitive rather than a "
                 "reshape, so a broadcast_in_dim that only adds a size-1 axis moves no data at "
                 "all."),
    Card("reshape", "jaxpr", "shape", pairs=("stablehlo.reshape",),
         words=("flatten", "ravel", "view"),
         what="Gives an array a new shape with the same number of elements, read and written in "
              "row-major order.",
         looks="`g:f32[32,1] = reshape[dimensions=None new_sizes=(32, 1) sharding=None] f`; read "
               "`new_sizes`, and `dimensions` is None unless a transpose was folded in.",
         misread="Reshape never reorders elements: splitting `[8,64,32]` into `[2,4,64,32]` (GQA) "
                 "groups consecutive heads, so heads 0 to 3 form group 0, and an interleaved "
                 "grouping would need a transpose."),
    Card("squeeze", "jaxpr", "shape", pairs=("stablehlo.reshape",),
         what="Removes the size-1 axes listed in `dimensions`.",
         looks="`c:f32[8,16] = squeeze[dimensions=(0,)] b`; in StableHLO it becomes a plain "
               "stablehlo.reshape.",
         misread="There is no squeeze at the StableHLO layer, so finding a reshape where the jaxpr "
                 "had squeeze is expected, not a sign that something else happened."),
    Card("transpose", "jaxpr", "shape", pairs=("stablehlo.transpose",),
         words=("swapaxes", "moveaxis", "permute axes"),
         what="Permutes an array's axes: output axis i is input axis `permutation[i]`.",
         looks="`d:bf16[64,128] = transpose[permutation=(1, 0)] b` is `k.T`; `permutation=(2, 0, "
               "1)` in the MoE dump moves the last axis to the front.",
         misread="An einsum's output order is not free: dot_general always emits batch, lhs-free, "
                 "rhs-free axes, so an einsum asking for another order ends in a transpose like "
                 "MoE's (2, 0, 1), which XLA may or may not fold into the matmul."),
    Card("rev", "jaxpr", "shape", pairs=("stablehlo.reverse",),
         words=("flip", "reverse"),
         what="Reverses the order of elements along the axes in `dimensions`.",
         looks="`b = rev[dimensions=(1,)] a`, which jnp.flip wraps in `jit[name=_flip]`.",
         misread="It is not a transpose: the axes stay where they are and only the element order "
                 "along them flips."),
    Card("concatenate", "jaxpr", "shape", pairs=("stablehlo.concatenate",),
         words=("concat", "jnp.concatenate", "stack"),
         what="Joins arrays end to end along the axis named by `dimension`; all other axes must "
              "match.",
         looks="`l:bf16[64,128] = concatenate[dimension=1] h k` in RoPE stitches the two rotated "
               "halves back together.",
         misread="The split that began RoPE does not survive as a split in StableHLO (it becomes "
                 "two slices), so the concatenate may have no matching split at that layer."),
    Card("pad", "jaxpr", "shape", pairs=("stablehlo.pad",),
         words=("jnp.pad", "padding"),
         what="Pads an array with a scalar value by per-axis (low, high, interior) amounts in "
              "`padding_config`; negative amounts crop.",
         looks="`bb:f32[8,2] = pad[padding_config=((0, 0, 0), (0, 1, 1))] ba 0.0:f32[]`: the "
               "padding value is the second operand, and each triple is (low, high, interior) for "
               "one axis.",
         misread="Interior padding inserts values between elements, so `(0, 1, 1)` and `(1, 0, 1)` "
                 "interleave zeros; in the associative-scan program that is how odd and even "
                 "positions are merged back, not border padding."),
    Card("slice", "jaxpr", "shape", pairs=("stablehlo.slice",),
         words=("x[a:b]", "index"),
         what="Cuts a statically known box out of an array using `start_indices`, `limit_indices` "
              "and optional `strides`.",
         looks="`b:f32[8,64] = slice[limit_indices=(8, 127) start_indices=(0, 0) strides=(1, 2)] "
               "a` takes every second column; limits are exclusive.",
         misread="`lax.associative_scan` leaves no scan primitive behind: its sweeps are these "
                 "strided slices plus adds, so a ladder of slices with `strides=(1, 2)` is the "
                 "scan itself."),
    Card("split", "jaxpr", "shape", pairs=("stablehlo.slice",),
         words=("jnp.split", "chunk"),
         what="Cuts an array into consecutive pieces along `axis`, with the piece lengths in "
              "`sizes`; jnp.split emits it.",
         looks="`d:bf16[64,64] e:bf16[64,64] = split[axis=1 sizes=(np.int64(64), np.int64(64))] a` "
               "has one outvar per piece.",
         misread="The `np.int64(...)` in `sizes` is only how numpy scalars print; and there is no "
                 "split in StableHLO, where each piece is its own stablehlo.slice."),
    Card("iota", "jaxpr", "creation", pairs=("stablehlo.iota",),
         words=("arange", "jnp.arange", "range", "position ids"),
         what="Creates an array that counts 0, 1, 2 and so on along one axis and is constant along "
              "the others.",
         looks="`h:i32[128,128] = iota[dimension=0 dtype=int32 shape=(128, 128) sharding=None]` "
               "takes no operands; `dimension` is the axis that counts.",
         misread="`jnp.arange(n)` with a static n is this primitive, not a stored constant; and "
                 "two iotas on different `dimension`s compared with ge are a causal mask, not "
                 "data."),
    # --- StableHLO ---
    Card("stablehlo.broadcast_in_dim", "stablehlo", "shape", pairs=("broadcast_in_dim",),
         what="Expands a tensor to a result shape, mapping operand dimension i to result dimension "
              "`dims[i]`; operand dimensions of size 1 may stretch.",
         looks="`%2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<64xf32>) -> "
               "tensor<64x1xf32>`; `dims = []` spreads a scalar over the whole result.",
         misread="There are many more of these than in the jaxpr: StableHLO elementwise ops need "
                 "equal shapes, so every scalar literal and every size-1 stretch gets its own "
                 "broadcast_in_dim."),
    Card("stablehlo.reshape", "stablehlo", "shape", pairs=("reshape", "squeeze"),
         what="Changes a tensor's shape without moving elements, in row-major order.",
         looks="`%0 = stablehlo.reshape %arg0 : (tensor<8x64x32xbf16>) -> tensor<2x4x64x32xbf16>` "
               "has no attributes, so the new shape is only in the result type.",
         misread="It stands for the jaxpr's reshape and its squeeze, and for the size-1 drop after "
                 "a dynamic_slice in a lowered scan, so the jaxpr line it came from may not say "
                 "reshape."),
    Card("stablehlo.transpose", "stablehlo", "shape", pairs=("transpose",),
         what="Permutes tensor dimensions: result dimension i is operand dimension `dims[i]`.",
         looks="`%3 = stablehlo.transpose %2, dims = [2, 0, 1] : (tensor<64x32x4xbf16>) -> "
               "tensor<4x64x32xbf16>`.",
         misread="`dims` means the same as the jaxpr's `permutation`, not its inverse; check "
                 "against the shapes in the signature rather than guessing the direction."),
    Card("stablehlo.reverse", "stablehlo", "shape", pairs=("rev",),
         what="Reverses the order of elements along the listed dimensions.",
         looks="`%0 = stablehlo.reverse %arg0, dims = [1] : tensor<8x16xf32>`.",
         misread="Its `dims` lists the dimensions to flip, unlike transpose's `dims`, which is a "
                 "permutation of all of them."),
    Card("stablehlo.concatenate", "stablehlo", "shape", pairs=("concatenate",),
         what="Joins tensors along one dimension.",
         looks="`%8 = stablehlo.concatenate %4, %7, dim = 1 : (tensor<64x64xbf16>, "
               "tensor<64x64xbf16>) -> tensor<64x128xbf16>`.",
         misread="`dim = 1` is the axis being joined, not the number of inputs; two 64-wide halves "
                 "give a 128-wide result."),
    Card("stablehlo.pad", "stablehlo", "shape", pairs=("pad",),
         what="Pads a tensor with a scalar padding value by low, high and interior amounts per "
              "dimension.",
         looks="`stablehlo.pad %25, %cst, low = [0, 0], high = [0, 1], interior = [0, 1]` lists "
               "the three amounts as separate attributes, one entry per dimension.",
         misread="The jaxpr groups padding per axis as (low, high, interior) triples while "
                 "StableHLO groups it by kind across axes; converting one into the other by eye is "
                 "where mistakes happen."),
    Card("stablehlo.slice", "stablehlo", "shape", pairs=("slice", "split"),
         what="Extracts a static sub-tensor given a start, limit and stride per dimension.",
         looks="`stablehlo.slice %arg0 [0:64, 0:64]` writes `start:limit` per dimension, with a "
               "stride as a third number: `[0:8, 0:127:2]`.",
         misread="A jaxpr split reaches StableHLO as one slice per piece, so two slices of the "
                 "same operand side by side are the halves of RoPE's split."),
    Card("stablehlo.iota", "stablehlo", "creation", pairs=("iota",),
         what="Creates a tensor that counts along `dim` and repeats along the other dimensions.",
         looks="`%1 = stablehlo.iota dim = 1 : tensor<1x4xi32>`; the shape and element type are "
               "only in the type.",
         misread="A big iota is not a big table in memory: after fusion XLA computes its values "
                 "where they are used, so a 128x128 iota feeding a compare is cheap."),
    Card("stablehlo.constant", "stablehlo", "creation",
         words=("literal",),
         what="Embeds a literal tensor in the program; jaxpr literals such as `128.0:f32[]` and "
              "captured constants become these.",
         looks="`%cst = stablehlo.constant dense<1.280000e+02> : tensor<f32>`: float constants are "
               "named `%cst`, integer ones `%c`, and special values print as hex (`0xFF800000` is "
               "f32 −inf, `0x7FC00000` is NaN).",
         misread="It has no jaxpr counterpart primitive, and a scalar constant is usually followed "
                 "by a broadcast_in_dim with `dims = []`, so the full-size array never appears in "
                 "the text."),
)
