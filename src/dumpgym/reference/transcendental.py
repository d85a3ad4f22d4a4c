"""Cards for powers, roots and transcendental functions: elementwise ops that cost more than an add."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("pow", "jaxpr", "elementwise", pairs=("stablehlo.power",),
         words=("power", "**"),
         what="Raises the first operand to the power of the second, elementwise, when the exponent "
              "is a float or a traced array.",
         looks="`b = pow a 2.0:f32[]`, no params; `x ** 2.0` (a float) lands here while `x ** 2` "
               "(a Python int) becomes integer_pow.",
         misread="A literal float exponent is still a general power, so `x ** 2.0` and `x ** 2` "
                 "leave different jaxprs for the same math; do not read pow as a cheap square."),
    Card("integer_pow", "jaxpr", "elementwise", pairs=("stablehlo.multiply", "stablehlo.divide"),
         words=("power", "**", "square"),
         what="Raises an array to a fixed integer power known at trace time, which is what `x ** "
              "3` or `x ** -2` become.",
         looks="`i = integer_pow[y=3] h` in tanh GELU; read `y`, which may be negative (the "
               "backward pass of div produces `integer_pow[y=-2]`).",
         misread="It never reaches StableHLO as a power op: it is unrolled into a few "
                 "stablehlo.multiply, plus a divide of 1 by the product when `y` is negative."),
    Card("square", "jaxpr", "elementwise", pairs=("chlo.square",),
         what="Squares each element; `jnp.square` emits it, and so does the variance inside "
              "`jnp.var`.",
         looks="`h = square g`, no params; in this corpus it lives inside LayerNorm's `_var` "
               "sub-jaxpr.",
         misread="Most squaring is not this primitive: `x * x` stays a mul and `x ** 2` becomes "
                 "integer_pow[y=2], so searching a dump for `square` misses them."),
    Card("sqrt", "jaxpr", "elementwise", pairs=("stablehlo.sqrt",),
         what="Takes the square root of each element of a floating-point array.",
         looks="`b = sqrt a`; its `accuracy` param is hidden unless you asked for one, and in the "
               "MHA program its operand is the head dimension as a literal.",
         misread="`jnp.sqrt(q.shape[-1])` of a Python int still traces as a sqrt eqn, so its "
                 "presence does not mean the attention scale depends on data."),
    Card("rsqrt", "jaxpr", "elementwise", pairs=("stablehlo.rsqrt",),
         words=("1/sqrt", "inverse square root"),
         what="Computes 1/√x for each element in one op; normalisation layers apply it to the "
              "variance plus epsilon.",
         looks="`be = rsqrt bd`, `accuracy` hidden; the add of `9.98377799987793e-07:bf16[]` just "
               "before it is the 1e-6 epsilon rounded to bf16.",
         misread="JAX does not rewrite `1 / jnp.sqrt(x)` into this primitive: that spelling leaves "
                 "a sqrt and a div in the jaxpr, and only `lax.rsqrt` gives rsqrt."),
    Card("exp", "jaxpr", "elementwise", pairs=("stablehlo.exponential",),
         words=("exponential", "softmax"),
         what="Computes e^x for each element; softmax, log-sum-exp and sigmoid are built on it.",
         looks="`v = exp u`, with `accuracy` hidden when unset; in a stable softmax its operand is "
               "always the output of a `sub` of the row maximum.",
         misread="An exp in bf16 is not a precision bug by itself here: after the max shift its "
                 "inputs are at most 0, so outputs lie in (0, 1], and the precision-sensitive step "
                 "is the sum after it, which runs in f32."),
    Card("log", "jaxpr", "elementwise", pairs=("stablehlo.log",),
         words=("logarithm", "log_softmax"),
         what="Takes the natural logarithm of each element.",
         looks="`log total` appears once at the end of a log-sum-exp, after the reduce_sum; "
               "`accuracy` is hidden unless set, and `jnp.log2` shows as this log followed by a "
               "div by `log 2.0`.",
         misread="Log-sum-exp does not take a log per element: it takes exactly one log of the "
                 "reduced sum and adds the row maximum back afterwards."),
    Card("log1p", "jaxpr", "elementwise", pairs=("stablehlo.log_plus_one",),
         what="Computes log(1 + x) accurately for small x, where forming 1 + x first would lose "
              "digits.",
         looks="`b = log1p a` (param `accuracy` hidden); `jnp.log1p` emits it, and so does "
               "`jnp.logaddexp`, which softplus uses.",
         misread="It is not an odd spelling of `log(1 + x)`: replacing it with the naive form "
                 "changes results for inputs near zero."),
    Card("expm1", "jaxpr", "elementwise", pairs=("stablehlo.exponential_minus_one",),
         what="Computes e^x − 1 accurately for small x.",
         looks="`b = expm1 a` (param `accuracy` hidden), emitted by `jnp.expm1` and by "
               "`jax.nn.elu` for its negative side.",
         misread="Seeing expm1 rather than exp followed by a sub of 1 means the accurate form was "
                 "chosen on purpose; the two are not interchangeable near zero."),
    Card("tanh", "jaxpr", "elementwise", pairs=("stablehlo.tanh",),
         what="Computes the hyperbolic tangent of each element; the default `jax.nn.gelu` "
              "(approximate=True) is built around it.",
         looks="`m = tanh l` (param `accuracy` hidden), with a mul by `0.796875:bf16[]` just "
               "before and `integer_pow[y=3]` before that: the cubic term of tanh GELU.",
         misread="A tanh does not mean the model uses a tanh activation; the GELU approximation is "
                 "the usual source, and exact GELU shows erfc instead."),
    Card("logistic", "jaxpr", "elementwise", pairs=("stablehlo.exponential", "stablehlo.divide"),
         words=("sigmoid", "jax.nn.sigmoid"),
         what="Computes the sigmoid 1/(1 + e^(−x)) of each element; `jax.nn.sigmoid` emits it.",
         looks="`b = logistic a` is one eqn (param `accuracy` hidden), but it has no single "
               "StableHLO op: it lowers to negate, exponential, add of 1 and divide.",
         misread="Do not look for a `stablehlo.logistic` when matching layers: JAX 0.10.2 spells "
                 "the formula out, so one sigmoid becomes four StableHLO lines."),
    Card("erf", "jaxpr", "elementwise", pairs=("chlo.erf",),
         words=("gelu",),
         what="Computes the Gauss error function of each element; `lax.erf` and "
              "`jax.scipy.special.erf` emit it.",
         looks="`b = erf a`, no params; it lowers to chlo.erf, which the compiler expands into a "
               "polynomial approximation.",
         misread="Exact GELU does not use it in this version: `jax.nn.gelu(approximate=False)` is "
                 "written with erfc of −x/√2, so look for erfc."),
    Card("erfc", "jaxpr", "elementwise", pairs=("chlo.erfc",),
         what="Computes the complementary error function 1 − erf(x) for each element, accurately "
              "even where erf is close to 1.",
         looks="`e = erfc d`, where `d` is `neg a` times `0.7071067690849304` (1/√2): that is "
               "exact GELU, finished by a mul with 0.5·x and a `copy`.",
         misread="Expecting a sub from 1 next to it misses the point: erfc exists to keep the "
                 "precision that the subtraction would throw away for large arguments."),
    Card("sin", "jaxpr", "elementwise", pairs=("stablehlo.sine",),
         what="Computes the sine of each element, in radians.",
         looks="`b = sin a`, `accuracy` hidden; rotary embeddings usually take sin and cos tables "
               "as inputs, so a RoPE dump (like this corpus's) often has no sin at all.",
         misread="In a gradient jaxpr a sin may be the derivative of a cos from the forward pass, "
                 "not a sin that you wrote."),
    Card("cos", "jaxpr", "elementwise", pairs=("stablehlo.cosine",),
         what="Computes the cosine of each element, in radians.",
         looks="`i = cos f`, with param `accuracy` hidden; inside a `remat2` body under grad, a "
               "cos next to a sin is the derivative of sin being recomputed.",
         misread="Positional-encoding code that precomputes its tables leaves no cos in the "
                 "model's dump; a cos there means the table is built inside the traced function."),
    Card("is_finite", "jaxpr", "elementwise", pairs=("stablehlo.is_finite",),
         what="Returns true for each element that is neither infinite nor NaN.",
         looks="`c:bool[...] = is_finite b`, no params; `jax.nn.logsumexp` uses it to replace an "
               "infinite row maximum by 0 before shifting.",
         misread="It is not a NaN test alone, since it is also false for ±inf; `ne x x` is the "
                 "pattern that catches NaN only."),
    # --- StableHLO ---
    Card("stablehlo.power", "stablehlo", "elementwise", pairs=("pow",),
         what="Raises lhs to the power rhs, element by element.",
         looks="`%0 = stablehlo.power %arg0, %arg1 : tensor<8x16xf32>`; a scalar exponent is "
               "broadcast to full shape first.",
         misread="Integer powers written `x ** 3` never reach this op, only float or traced "
                 "exponents do, so its absence does not mean no powers are taken."),
    Card("chlo.square", "stablehlo", "elementwise", pairs=("square",),
         what="The CHLO (client HLO) op for x·x per element, emitted for the square primitive.",
         looks="`%7 = chlo.square %6 : tensor<64x128xf32> -> tensor<64x128xf32>`: note the `chlo.` "
               "prefix and a signature written without parentheses.",
         misread="CHLO ops are not final: the compiler expands them into plain StableHLO (here a "
                 "multiply), so a chlo op is a convenience name, not a special instruction."),
    Card("stablehlo.sqrt", "stablehlo", "elementwise", pairs=("sqrt",),
         what="Takes the square root of each element.",
         looks="`%0 = stablehlo.sqrt %cst : tensor<f32>` in MHA: the square root of the head "
               "dimension, as a scalar constant.",
         misread="A sqrt of a `stablehlo.constant` is folded by XLA at compile time; it is in the "
                 "text because JAX does not fold, not because it runs every step."),
    Card("stablehlo.rsqrt", "stablehlo", "elementwise", pairs=("rsqrt",),
         what="Computes the reciprocal square root of each element.",
         looks="`%11 = stablehlo.rsqrt %10 : tensor<64x1xbf16>` on the per-row variance, followed "
               "by a broadcast_in_dim back to the row width.",
         misread="It runs in the dtype shown, bf16 in LayerNorm here, even though the variance was "
                 "accumulated in f32; the convert back to bf16 happened before it."),
    Card("stablehlo.exponential", "stablehlo", "elementwise", pairs=("exp", "logistic"),
         what="Computes e^x for each element.",
         looks="`%6 = stablehlo.exponential %5 : tensor<64x128xbf16>`; the jaxpr's short `exp` is "
               "spelled out in full here.",
         misread="Lowered sigmoids contain one too (after a negate), so counting exponentials does "
                 "not count softmaxes."),
    Card("stablehlo.log", "stablehlo", "elementwise", pairs=("log",),
         what="Computes ln(x), the base-e logarithm, for each element.",
         looks="`%9 = stablehlo.log %8 : tensor<64x1xbf16>` in log-sum-exp, after the f32 row sum "
               "has been converted back to bf16.",
         misread="There is no base-2 or base-10 variant at this layer: `jnp.log2` is a log and a "
                 "divide by log(2), so a log does not tell you the base."),
    Card("stablehlo.log_plus_one", "stablehlo", "elementwise", pairs=("log1p",),
         what="Computes log(1 + x) for each element, accurately near zero.",
         looks="`%0 = stablehlo.log_plus_one %arg0 : tensor<8x16xf32>`, the lowering of log1p.",
         misread="The long name is one op, not a log plus an add; a separate add of 1 followed by "
                 "a log would be the inaccurate form."),
    Card("stablehlo.exponential_minus_one", "stablehlo", "elementwise", pairs=("expm1",),
         what="Computes e^x − 1 for each element, accurately near zero.",
         looks="`%0 = stablehlo.exponential_minus_one %arg0 : tensor<8x16xf32>`, the lowering of "
               "expm1.",
         misread="Do not expect a subtract of 1 nearby: the whole e^x − 1 happens inside this one "
                 "op."),
    Card("stablehlo.tanh", "stablehlo", "elementwise", pairs=("tanh",),
         what="Computes the hyperbolic tangent of each element.",
         looks="`%8 = stablehlo.tanh %7 : tensor<64x512xbf16>`, preceded by a multiply with the "
               "broadcast constant `7.968750e-01` and followed by an add of 1 and a multiply by "
               "0.5.",
         misread="In the remat program these lines sit in @main with nothing marking them as "
                 "checkpointed: without a grad there is nothing to recompute, so remat2 leaves no "
                 "trace."),
    Card("chlo.erf", "stablehlo", "elementwise", pairs=("erf",),
         what="The CHLO error-function op, lowered from the erf primitive.",
         looks="`%0 = chlo.erf %arg0 : tensor<8x16xf32> -> tensor<8x16xf32>`, in the arrow-style "
               "CHLO signature.",
         misread="It is expanded into a rational polynomial approximation during compilation, so "
                 "it costs a handful of multiplies and adds, not one instruction."),
    Card("chlo.erfc", "stablehlo", "elementwise", pairs=("erfc",),
         what="The CHLO complementary error function op, lowered from erfc.",
         looks="`chlo.erfc %x : tensor<4xf32> -> tensor<4xf32>`, fed in exact GELU by a multiply "
               "with the constant 0.70710677.",
         misread="It is not `1 - chlo.erf`: it has its own expansion, chosen to stay accurate "
                 "where erf is nearly 1."),
    Card("stablehlo.sine", "stablehlo", "elementwise", pairs=("sin",),
         what="Computes the sine of each element.",
         looks="`%4 = stablehlo.sine %arg0 : tensor<8x16xf32>`; the jaxpr's `sin` gets the longer "
               "name here.",
         misread="A sine and a cosine of the same operand side by side in a backward computation "
                 "are usually a derivative pair, not a rotation."),
    Card("stablehlo.cosine", "stablehlo", "elementwise", pairs=("cos",),
         what="Computes the cosine of each element.",
         looks="`%3 = stablehlo.cosine %1#0 : tensor<8x16xf32>`, here reading the first result of "
               "an optimization_barrier in a checkpointed backward pass.",
         misread="Its operand naming `%1#0` means result 0 of a multi-result op, not a bitwise or "
                 "indexing operation on `%1`."),
    Card("stablehlo.is_finite", "stablehlo", "elementwise", pairs=("is_finite",),
         what="Returns an i1 tensor that is true where an element is neither infinite nor NaN.",
         looks="`%2 = stablehlo.is_finite %1 : (tensor<f32>) -> tensor<i1>`, usually feeding a "
               "stablehlo.select.",
         misread="The result is a boolean mask of the same shape, not a cleaned-up copy of the "
                 "input; the select after it does the replacing."),
)
