"""Cards for contractions: the matmul and convolution ops."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("dot_general", "jaxpr", "contraction", pairs=("stablehlo.dot_general",),
         words=("matmul", "einsum", "jnp.dot", "@", "batched matmul", "bmm"),
         what="The general tensor contraction: it sums products over contracting axes while "
              "keeping batch axes paired. Every matmul, einsum and batched matmul becomes one.",
         looks="`dimension_numbers=(([1], [0]), ([], []))` is ((lhs_contracting, rhs_contracting), "
               "(lhs_batch, rhs_batch)); `preferred_element_type` sets the output dtype, and "
               "`precision` and `out_sharding` are hidden unless set.",
         misread="Read the tuple contracting-first: `(([2], [1]), ([0], [0]))` sums lhs axis 2 "
                 "against rhs axis 1 and pairs axis 0 of both, and swapping the halves mistakes "
                 "the batch axis for the summed one."),
    Card("conv_general_dilated", "jaxpr", "contraction", pairs=("stablehlo.convolution",),
         words=("conv", "convolution", "conv2d"),
         what="General N-d convolution with window strides, padding, input (lhs) and kernel (rhs) "
              "dilation, and feature or batch grouping.",
         looks="`conv_general_dilated[dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 1, 2, "
               "3), rhs_spec=(0, 1, 2, 3), out_spec=(0, 1, 2, 3)) padding=((1, 1), (1, 1)) "
               "window_strides=(1, 1) ...]`; each spec lists which axes are batch, feature and "
               "spatial.",
         misread="An `lhs_dilation` above 1 is a transposed (fractionally strided) convolution, "
                 "and a `feature_group_count` equal to the channel count is a depthwise one; "
                 "neither shows in the op's name."),
    # --- StableHLO ---
    Card("stablehlo.dot_general", "stablehlo", "contraction", pairs=("dot_general",),
         what="Contracts two tensors over contracting dimensions while pairing batch dimensions; "
              "the result has batch, then lhs-free, then rhs-free dimensions.",
         looks="`stablehlo.dot_general %3, %arg2, batching_dims = [0] x [0], contracting_dims = "
               "[2] x [1], precision = [DEFAULT, DEFAULT]`; `batching_dims` is omitted when empty, "
               "and the result element type is only in the signature.",
         misread="A bf16 result type does not mean the products were summed in bf16: the "
                 "accumulator precision is the backend's choice, and `precision = [DEFAULT, "
                 "DEFAULT]` holds one setting per operand."),
    Card("stablehlo.convolution", "stablehlo", "contraction", pairs=("conv_general_dilated",),
         what="N-d convolution with window strides, padding, dilations and grouping, laid out by "
              "its `dim_numbers`.",
         looks="`stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, "
               "f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], "
               "rhs_dilate = [1, 1], ...}`.",
         misread="In `[b, f, 0, 1]` the digits number the spatial dimensions in order, they are "
                 "not sizes; the letters mark batch and feature, and for the kernel output (o) and "
                 "input (i) features."),
)
