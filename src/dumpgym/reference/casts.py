"""Cards for casts: ops that change an element type, by value or by bits."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("convert_element_type", "jaxpr", "cast", pairs=("stablehlo.convert",),
         words=("cast", "astype", "dtype", "upcast", "downcast"),
         what="Casts an array to another dtype by value: `x.astype`, implicit promotion, and bool "
              "masks turned into numbers all produce it.",
         looks="`w:f32[64,128] = convert_element_type[new_dtype=float32 weak_type=False] t`; read "
               "`new_dtype`, and `weak_type=True` means the result still promotes like a Python "
               "scalar.",
         misread="The bf16 to f32 cast before a reduce_sum is deliberate (jnp.sum and softmax "
                 "accumulate low-precision data in f32), and the cast back after it is where "
                 "precision is given up; neither is noise to skip."),
    Card("bitcast_convert_type", "jaxpr", "cast", pairs=("stablehlo.bitcast_convert",),
         words=("bitcast", "reinterpret", "view"),
         what="Reinterprets the bits of each element as another dtype without changing them; "
              "random-number code uses it to move between unsigned ints and floats.",
         looks="`b = bitcast_convert_type[new_dtype=float32] a`; when the widths differ the shape "
               "gains or loses a trailing axis (f32 to u8 adds an axis of 4).",
         misread="It is not a value cast: bitcasting the float 1.0 to int32 gives 1065353216, not "
                 "1."),
    # --- StableHLO ---
    Card("stablehlo.convert", "stablehlo", "cast", pairs=("convert_element_type",),
         what="Converts each element to another element type by value; floats round to the nearest "
              "representable value, and float-to-integer truncates toward zero.",
         looks="`%0 = stablehlo.convert %arg0 : (tensor<64x128xbf16>) -> tensor<64x128xf32>`: "
               "there is no dtype attribute, the target type is only after the `->`, and booleans "
               "are `i1`.",
         misread="A convert from `i1` is a mask becoming numbers (the last step of one_hot), not a "
                 "precision change; look at both sides of the arrow before calling it an upcast."),
    Card("stablehlo.bitcast_convert", "stablehlo", "cast", pairs=("bitcast_convert_type",),
         what="Reinterprets each element's bits as another element type, adding or dropping a "
              "trailing dimension when the widths differ.",
         looks="`%1 = stablehlo.bitcast_convert %0 : (tensor<4xui32>) -> tensor<4xf32>`; PRNG code "
               "uses it to build floats in [1, 2) from random bits.",
         misread="The numbers change completely although no arithmetic is done; it is not the "
                 "value-preserving stablehlo.convert."),
)
