"""Cards for the ops that training and sampling code brings: random bits, saved residuals, sharding hints."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("random_bits", "jaxpr", "creation",
         words=("random", "rng", "prng", "dropout"),
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
         words=("rounding", "bf16"),
         what="Rounds each value to a narrower floating-point format while keeping its dtype.",
         looks="`w:f32[16,64] = reduce_precision[exponent_bits=8 mantissa_bits=23] v`: with f32's "
               "own 8 and 23 bits, as jax.checkpoint puts on the residuals its policy saves.",
         misread="With the dtype's own widths it changes no value; it is a marker that keeps the "
                 "saved value and its recomputation bit-identical, not a cast to bf16."),
    Card("sharding_constraint", "jaxpr", "sharding", pairs=("sdy.sharding_constraint",),
         words=("with_sharding_constraint",),
         what="Asks the partitioner to give a value a sharding at this point; "
              "jax.lax.with_sharding_constraint makes it.",
         looks="`sharding_constraint[sharding=NamedSharding(mesh=..., spec=P('data', None)) "
               "layout=None unconstrained_dims=set() context_mesh=...]`: the spec names which mesh "
               "axis splits each dimension.",
         misread="It computes nothing in the jaxpr and the aval keeps its global shape; the data "
                 "movement it may cause (an all-reduce, an all-gather) appears only in compiled HLO."),
    Card("pallas_call", "jaxpr", "control", pairs=("stablehlo.custom_call",),
         words=("kernel", "pallas", "mosaic"),
         what="Runs a kernel written with Pallas: its body is a jaxpr over Refs, run once per point of "
              "a grid, each time on the blocks its BlockSpecs pick out of the operands.",
         looks="`g:bf16[256,256] = pallas_call[grid_mapping=GridMapping(grid=(2, 2), block_mappings=...) "
               "jaxpr={ lambda ; h:Ref<default>{bf16[128,512]} ... }] f b`: the body's binders are the "
               "blocks (one per operand, then the outputs), not whole arrays.",
         misread="The body's avals are one block's, not the operands'; and nothing in it reaches XLA: it "
                 "lowers to one custom_call whose body is Mosaic's compiled kernel, opaque to fusion."),
    Card("get", "jaxpr", "memory",
         words=("ref", "load"),
         what="Reads the value a Ref holds (all of it, or the part its indexers select) into an array; "
              "in a Pallas kernel, a load from the block in VMEM.",
         looks="`k:bf16[128,512] <- h[...]`: the printer writes it as an arrow from the Ref, not as "
               "`= get`; `[...]` reads the whole block, and the hidden `tree` param holds the indexers' structure.",
         misread="It is not a copy of the operand from HBM: the Ref is already the block the grid step "
                 "was given, so the shape on the left is the block's; it has no counterpart outside the kernel."),
    Card("swap", "jaxpr", "memory",
         words=("ref", "store"),
         what="Writes a value into a Ref and returns what was there before; `o_ref[...] = x` in a "
              "kernel is a swap whose old value goes unused.",
         looks="`p:bf16[128,128], j[...] <- j[...], o`: the old contents come out as `p` while `o` "
               "goes into the output block `j`; its `tree` param, not printed, holds the indexers' structure.",
         misread="The result on the left is the old value, not the new one; the kernel's output is the "
                 "Ref `j`, which pallas_call returns once every grid step has written its block; no "
                 "StableHLO counterpart exists, the kernel being opaque."),
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
