"""Cards for the ops that training and sampling code brings: random bits, saved residuals, sharding hints."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("random_bits", "jaxpr", "creation",
         what="Draws raw unsigned random bits from a typed PRNG key; jax.random's samplers "
              "(uniform, bernoulli, normal) start from it and shape the bits into numbers.",
         looks="`h:u32[8,32] = random_bits[bit_width=32 shape=(8, 32)] a` with `a:key<fry>[]`: "
               "`shape` is the output's shape and `bit_width` its unsigned width.",
         misread="It has no single counterpart at the other layer: for a threefry key it lowers to a "
                 "private function of shifts, xors and adds (a rolled while loop on CPU), not to "
                 "stablehlo.rng."),
    Card("shift_right_logical", "jaxpr", "elementwise", pairs=("stablehlo.shift_right_logical",),
         what="Shifts each unsigned integer's bits right, filling with zeros from the top.",
         looks="`i:u32[8,32] = shift_right_logical h 9:u32[]`, no params: uniform sampling keeps "
               "the top 23 random bits this way to build a float mantissa.",
         misread="It is not a division of signed numbers (that is shift_right_arithmetic, which "
                 "copies the sign bit); on random bits it only selects which bits survive."),
    Card("reduce_precision", "jaxpr", "cast", pairs=("stablehlo.reduce_precision",),
         what="Rounds each value to a narrower floating-point format while keeping its dtype.",
         looks="`w:f32[16,64] = reduce_precision[exponent_bits=8 mantissa_bits=23] v`: with f32's "
               "own 8 and 23 bits, as jax.checkpoint puts on the residuals its policy saves.",
         misread="With the dtype's own widths it changes no value; it is a marker that keeps the "
                 "saved value and its recomputation bit-identical, not a cast to bf16."),
    Card("sharding_constraint", "jaxpr", "sharding", pairs=("sdy.sharding_constraint",),
         what="Asks the partitioner to give a value a sharding at this point; "
              "jax.lax.with_sharding_constraint makes it.",
         looks="`sharding_constraint[sharding=NamedSharding(mesh=..., spec=P('data', None)) "
               "layout=None unconstrained_dims=set() context_mesh=...]`: the spec names which mesh "
               "axis splits each dimension.",
         misread="It computes nothing in the jaxpr and the aval keeps its global shape; the data "
                 "movement it may cause (an all-reduce, an all-gather) appears only in compiled HLO."),
    # --- StableHLO ---
    Card("stablehlo.shift_right_logical", "stablehlo", "elementwise", pairs=("shift_right_logical",),
         what="Shifts the bits of each integer right by the amount in the second operand, filling "
              "with zeros.",
         looks="`%22 = stablehlo.shift_right_logical %20, %21 : tensor<8x32xui32>`, the amount "
               "broadcast to the operand's shape first.",
         misread="A shift by the width or more gives 0, not an error; in threefry's rounds it pairs "
                 "with a shift_left and an or to make a rotation."),
    Card("stablehlo.shift_left", "stablehlo", "elementwise",
         what="Shifts the bits of each integer left by the amount in the second operand, filling "
              "with zeros.",
         looks="`%5 = stablehlo.shift_left %arg2, %4 : tensor<8x32xui32>`, inside the private "
               "function that a threefry key's random bits lower to.",
         misread="It has no counterpart in these jaxprs: threefry's rotations are written inside "
                 "its lowering rule, so the jaxpr shows only random_bits."),
    Card("stablehlo.reduce_precision", "stablehlo", "cast", pairs=("reduce_precision",),
         what="Rounds floating-point values to a format with the given exponent and mantissa bits, "
              "keeping the element type.",
         looks="`%1 = stablehlo.reduce_precision %0, format = e8m23 : tensor<16x64xf32>`: e8m23 is "
               "f32's own format.",
         misread="The tensor type does not change, so it is easy to read as a bf16 cast; with e8m23 "
                 "on f32 it leaves every value as it was."),
)
