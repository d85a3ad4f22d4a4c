"""Cards for elementwise arithmetic and rounding: same shape in and out, every element touched."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("add", "jaxpr", "elementwise", pairs=("stablehlo.add",),
         words=("plus", "+"),
         what="Adds two arrays element by element. One operand may be a scalar literal, and in "
              "this JAX version one may also carry size-1 axes that are stretched to match the "
              "other.",
         looks="`h:bf16[64,512] = add f g` has no params; in the MLP the bias `g` is `bf16[1,512]` "
               "against `f:bf16[64,512]`, so read both operand avals to see the stretch.",
         misread="A bias add, a residual connection and an accumulator update all print as the "
                 "same bare `add`; which one you are looking at is told by where the operands come "
                 "from, not by the op."),
    Card("sub", "jaxpr", "elementwise", pairs=("stablehlo.subtract",),
         words=("minus", "subtract"),
         what="Subtracts the second operand from the first, element by element, with the same "
              "scalar and size-1 stretching as add.",
         looks="`u = sub m t` with no params; operand order matters, so `j = sub 128.0:f32[] i` in "
               "`jnp.var` computes 128 − ddof.",
         misread="`sub x row_max` just before an `exp` is the stability shift of softmax or "
                 "log-sum-exp: the row maximum is taken out before exponentiating and cancels "
                 "(softmax) or is added back (log-sum-exp), so it is not part of the answer."),
    Card("mul", "jaxpr", "elementwise", pairs=("stablehlo.multiply",),
         words=("times", "multiply", "product"),
         what="Multiplies two arrays element by element; scales, gates, casted masks and the terms "
              "of polynomial approximations all use it.",
         looks="`p = mul h o`; the printer hides the `out_dtype` param unless it is set, so the "
               "result dtype is read from the outvar's aval, and a scalar operand prints inline as "
               "a literal like `0.5:bf16[]`.",
         misread="A mul by a constant such as `0.796875:bf16[]` is usually a folded coefficient of "
                 "a library formula (√(2/π) of tanh GELU, rounded to bf16), not a learned weight."),
    Card("div", "jaxpr", "elementwise", pairs=("stablehlo.divide",),
         words=("divide", "quotient"),
         what="Divides the first operand by the second, element by element. On integers it rounds "
              "toward zero, which is why `//` arrives wrapped in a `jit[name=floor_divide]` with "
              "sign fix-ups.",
         looks="`p = div m o` with no params; a literal divisor as in `c = div b 4.0:f32[]` is the "
               "1/n of a mean, n being the length of the reduced axis.",
         misread="A mean is not its own primitive: `jnp.mean` is a reduce_sum followed by this "
                 "div, so look for the pair rather than for a `mean` op."),
    Card("neg", "jaxpr", "elementwise", pairs=("stablehlo.negate",),
         words=("negative", "negate"),
         what="Flips the sign of every element.",
         looks="`ba = neg z`, no params; backward passes are full of it, because the cotangent of "
               "a sub's second operand is negated.",
         misread="A run of neg in a gradient jaxpr is mostly the transpose of sub rather than code "
                 "you wrote, and XLA folds most of it into neighbouring arithmetic."),
    Card("abs", "jaxpr", "elementwise", pairs=("stablehlo.abs",),
         what="Takes the absolute value of each element; for complex input it returns the "
              "magnitude in the matching real dtype.",
         looks="`b = abs a`, no params; the outvar's dtype differs from the invar's only for "
               "complex numbers (c64 in, f32 out).",
         misread="In `jax.nn.logsumexp` the abs sits between the sum and the log so that its "
                 "`return_sign` option can work; it is bookkeeping, not a step of the formula you "
                 "wrote."),
    Card("sign", "jaxpr", "elementwise", pairs=("stablehlo.sign",),
         what="Maps each element to −1, 0 or +1 by its sign, in the input's own dtype (NaN stays "
              "NaN).",
         looks="`f = sign a`, no params; the result is numeric (`i32` or `f32`), not `bool`, so it "
               "can multiply directly.",
         misread="sign(0) is 0, not +1, so a sign used as a ±1 multiplier zeroes out exact zeros; "
                 "check whether that matters before reading it as a clean ±1 mask."),
    Card("max", "jaxpr", "elementwise", pairs=("stablehlo.maximum",),
         words=("maximum", "relu"),
         what="The elementwise maximum of two arrays, where a NaN in either operand gives NaN. "
              "jnp.maximum emits it, and jax.nn.relu arrives as a custom_jvp_call around one.",
         looks="`r = max -inf:bf16[] q` has no params; a scalar literal operand makes it a clip or "
               "a guard rather than a comparison of two tensors.",
         misread="It is not reduce_max: max compares two arrays position by position, and the `max "
                 "-inf q` right after a reduce_max in softmax comes from `jnp.max(..., "
                 "initial=-inf)`, not from a masking step."),
    Card("min", "jaxpr", "elementwise", pairs=("stablehlo.minimum",),
         words=("minimum",),
         what="The elementwise minimum of two arrays, with NaN propagating as it does for max.",
         looks="`b = min g f` with no params; `jnp.clip(x, lo, hi)` prints as a max then a min "
               "inside `jit[name=clip]`.",
         misread="It is easy to take min for reduce_min; only reduce_min has an `axes` param and "
                 "an outvar of lower rank."),
    Card("clamp", "jaxpr", "elementwise", pairs=("stablehlo.clamp",),
         words=("clip", "jnp.clip"),
         what="Limits every element of the middle operand to lie between the first operand (low) "
              "and the third (high).",
         looks="`b = clamp 0.0:f32[] a 1.0:f32[]`: operand order is low, x, high, so the array "
               "being clamped sits in the middle; `lax.switch` emits one to keep its branch index "
               "in range.",
         misread="jnp.clip does not produce this primitive in this version (it emits max then "
                 "min), so a dump without clamp may still clip."),
    Card("rem", "jaxpr", "elementwise", pairs=("stablehlo.remainder",),
         words=("mod", "modulo", "remainder"),
         what="The remainder of elementwise division, taking the sign of the dividend the way C's "
              "fmod does.",
         looks="`i = rem a d`, no params; Python's `x % y` arrives as a `jit` holding rem together "
               "with `ne`, `lt`, `and`, `add` and `select_n`, which fix the sign.",
         misread="A bare rem gives −1 for −7 rem 3 while Python's `-7 % 3` is 2; the select_n "
                 "around it is what makes them agree."),
    Card("copy", "jaxpr", "elementwise",
         what="Returns its operand unchanged: same values, shape and dtype. JAX uses it where a "
              "distinct buffer is requested.",
         looks="`g = copy f`, no params; `jnp.array(x, copy=True)` emits it, and so does exact "
               "GELU (`jax.nn.gelu(approximate=False)`) in this version.",
         misread="It is not a memory copy to hunt down: it has no StableHLO counterpart and "
                 "disappears when lowered."),
    Card("floor", "jaxpr", "elementwise", pairs=("stablehlo.floor",),
         what="Rounds each float element down to an integer value, keeping the float dtype.",
         looks="`b = floor a`, no params; the outvar is still `f32`, so a convert_element_type "
               "follows whenever an index is wanted.",
         misread="floor of a negative number moves away from zero (−1.5 becomes −2), unlike the "
                 "truncation a float-to-int convert_element_type does."),
    Card("ceil", "jaxpr", "elementwise", pairs=("stablehlo.ceil",),
         what="Rounds each float element up to an integer value, keeping the float dtype.",
         looks="`b = ceil a`, no params, same aval in and out.",
         misread="Shape arithmetic such as the number of blocks is done in Python before tracing, "
                 "so a ceil in the jaxpr works on traced values, never on static sizes."),
    Card("round", "jaxpr", "elementwise",
         pairs=("stablehlo.round_nearest_even", "stablehlo.round_nearest_afz"),
         words=("rint", "jnp.round"),
         what="Rounds each element to the nearest integer value; `rounding_method` decides where "
              "exact halves go.",
         looks="`round[rounding_method=1]` inside `jit[name=round]` is `jnp.round` (halves to "
               "even), while a bare `round[rounding_method=0]` is `lax.round` (halves away from "
               "zero).",
         misread="`jnp.round(2.5)` is 2.0 but `lax.round(2.5)` is 3.0; the integer in "
                 "`rounding_method` is the only visible difference."),
    # --- StableHLO ---
    Card("stablehlo.add", "stablehlo", "elementwise", pairs=("add", "add_any"),
         what="Adds two tensors of identical shape and element type, element by element.",
         looks="`%19 = stablehlo.add %16, %18 : tensor<64x128xbf16>` carries a single type because "
               "operands and result share it; it also appears as the combiner in `stablehlo.reduce "
               "... applies stablehlo.add` and inside all_reduce regions.",
         misread="An add on `tensor<f32>` scalars inside a `^bb0` region is a reduction's "
                 "combiner, not an extra addition in your program."),
    Card("stablehlo.subtract", "stablehlo", "elementwise", pairs=("sub",),
         what="Subtracts the second tensor from the first, element by element, on one shape and "
              "type.",
         looks="`%8 = stablehlo.subtract %arg0, %7 : tensor<64x128xbf16>`, with the broadcast of "
               "the subtrahend on the line above it.",
         misread="Where the jaxpr had `sub t ba` with `ba:bf16[64,1]`, StableHLO adds a "
                 "broadcast_in_dim first, because its elementwise ops never stretch size-1 "
                 "dimensions."),
    Card("stablehlo.multiply", "stablehlo", "elementwise", pairs=("mul", "integer_pow"),
         what="Multiplies two same-shaped tensors element by element; integer powers are expanded "
              "into it.",
         looks="`%13 = stablehlo.multiply %8, %12 : tensor<64x128xbf16>`; a constant factor "
               "arrives as a `stablehlo.constant` and a `broadcast_in_dim ... dims = []`.",
         misread="`multiply %0, %0` followed by `multiply %1, %0` is `x ** 3` (integer_pow) "
                 "unrolled, not two separate steps of your model."),
    Card("stablehlo.divide", "stablehlo", "elementwise", pairs=("div", "integer_pow", "logistic"),
         what="Divides the first tensor by the second, element by element; integer division "
              "truncates toward zero.",
         looks="`%4 = stablehlo.divide %2, %3 : tensor<64x1xf32>`, where a divisor broadcast from "
               "`stablehlo.constant dense<1.280000e+02>` is the 1/n of a mean.",
         misread="A divide of a broadcast 1.0 by something is a reciprocal coming from a negative "
                 "integer_pow or from a lowered sigmoid, not a normalisation."),
    Card("stablehlo.negate", "stablehlo", "elementwise", pairs=("neg",),
         what="Flips the sign of every element of a tensor.",
         looks="`%28 = stablehlo.negate %27 : tensor<32x1xf32>`: one operand, one type.",
         misread="A negate feeding an exponential, then an add of 1 and a divide, is a sigmoid "
                 "spelled out by logistic's lowering, not a sign flip in your loss."),
    Card("stablehlo.abs", "stablehlo", "elementwise", pairs=("abs",),
         what="Takes the absolute value of each element; on complex tensors it returns the real "
              "modulus.",
         looks="`%9 = stablehlo.abs %8 : tensor<f32>`; for complex input the signature changes "
               "type, `(tensor<4xcomplex<f32>>) -> tensor<4xf32>`.",
         misread="In a lowered `jax.nn.logsumexp` it sits between the summing reduce and the log; "
                 "it does not mean the inputs were made non-negative."),
    Card("stablehlo.sign", "stablehlo", "elementwise", pairs=("sign",),
         what="Returns −1, 0 or +1 for each element, in the tensor's own element type.",
         looks="`%0 = stablehlo.sign %arg0 : tensor<8x16xf32>`, one operand and one type.",
         misread="Its result is numeric, not `i1`; a sign is a multiplier, and a boolean mask "
                 "would come from stablehlo.compare instead."),
    Card("stablehlo.maximum", "stablehlo", "elementwise", pairs=("max",),
         what="The elementwise maximum of two same-shaped tensors, and the combiner that makes a "
              "stablehlo.reduce a max-reduction.",
         looks="Standalone as `%2 = stablehlo.maximum %1, %0 : tensor<64xbf16>`, or named after "
               "`applies` in `stablehlo.reduce(%x init: %cst) applies stablehlo.maximum across "
               "dimensions = [1]`.",
         misread="The standalone maximum against a broadcast `0xFF80` (bf16 −inf) just after the "
                 "reduce is softmax's `initial=-inf` guard, not a second reduction."),
    Card("stablehlo.minimum", "stablehlo", "elementwise", pairs=("min",),
         what="The elementwise minimum of two same-shaped tensors, and the combiner of a "
              "min-reduction.",
         looks="`%3 = stablehlo.minimum %2, %1 : tensor<4xf32>`; as a combiner it shows as "
               "`applies stablehlo.minimum` on a reduce whose init is +inf.",
         misread="A maximum and then a minimum against two broadcast constants is jnp.clip; a "
                 "single stablehlo.clamp only appears when the program called `lax.clamp`."),
    Card("stablehlo.clamp", "stablehlo", "elementwise", pairs=("clamp",),
         what="Bounds each element of the operand between a minimum and a maximum.",
         looks="`%2 = stablehlo.clamp %0, %arg0, %1 : tensor<8x16xf32>`: the bounds come first and "
               "last with the data in the middle, and JAX broadcasts both bounds to full shape "
               "beforehand.",
         misread="Reading the first operand as the value being clamped is the common slip; it is "
                 "the lower bound."),
    Card("stablehlo.remainder", "stablehlo", "elementwise", pairs=("rem",),
         what="The remainder of dividing lhs by rhs elementwise, with the sign of the dividend.",
         looks="`%3 = stablehlo.remainder %2, %c_0 : tensor<ui32>`; inside a shard_map body, a "
               "remainder of partition_id by the axis size is how axis_index is computed.",
         misread="It is the truncated (C fmod) remainder, so Python-style modulo needs the compare "
                 "and select fix-up that jnp emits around it."),
    Card("stablehlo.floor", "stablehlo", "elementwise", pairs=("floor",),
         what="Rounds each floating-point element toward negative infinity.",
         looks="`%0 = stablehlo.floor %arg0 : tensor<4xf32>`, result type equal to the operand "
               "type.",
         misread="The result is still a float tensor; the int index you might expect needs a "
                 "stablehlo.convert afterwards."),
    Card("stablehlo.ceil", "stablehlo", "elementwise", pairs=("ceil",),
         what="Rounds each floating-point element toward positive infinity.",
         looks="`%0 = stablehlo.ceil %arg0 : tensor<4xf32>`, one operand and one type.",
         misread="Like floor it keeps the float type, so `ceil` of 2.0000001 is 3.0, a float; "
                 "rounding noise just above an integer bumps it up a whole step."),
    Card("stablehlo.round_nearest_even", "stablehlo", "elementwise", pairs=("round",),
         what="Rounds each element to the nearest integer value, sending exact halves to the even "
              "neighbour.",
         looks="`%0 = stablehlo.round_nearest_even %arg0 : tensor<4xf32>`, what `jnp.round` lowers "
               "to.",
         misread="2.5 becomes 2.0 and 3.5 becomes 4.0 here, which is banker's rounding, not the "
                 "school rule."),
    Card("stablehlo.round_nearest_afz", "stablehlo", "elementwise", pairs=("round",),
         what="Rounds each element to the nearest integer value, sending exact halves away from "
              "zero.",
         looks="`%0 = stablehlo.round_nearest_afz %arg0 : tensor<4xf32>`, what `lax.round` lowers "
               "to by default.",
         misread="Two programs that both 'round' can differ at exact halves: afz gives 3.0 for 2.5 "
                 "where the even variant gives 2.0."),
)
