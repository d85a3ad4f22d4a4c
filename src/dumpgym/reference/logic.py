"""Cards for comparisons, boolean and bitwise logic, and selection."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr ---
    Card("eq", "jaxpr", "logic", pairs=("stablehlo.compare",),
         words=("==", "compare", "equal"),
         what="Tests two arrays for equality element by element and returns a bool array.",
         looks="`h:bool[64,4] = eq f g` in one_hot compares an index column `i32[64,1]` with an "
               "iota row `i32[1,4]`, and the size-1 axes stretch to `[64,4]`.",
         misread="In a gradient jaxpr, `eq e g` against the row maximum is the derivative of "
                 "reduce_max finding the max positions (tied maxima share the gradient), not a "
                 "comparison in your model."),
    Card("ne", "jaxpr", "logic", pairs=("stablehlo.compare",),
         words=("!=", "compare", "not equal"),
         what="Tests two arrays for inequality element by element and returns bools.",
         looks="`c = ne a a`, an array compared with itself, is a NaN test, since NaN is the only "
               "value unequal to itself.",
         misread="An ne feeding an `and` in integer code is usually part of jnp's floor-division "
                 "or modulo sign fix-up, not a condition you wrote."),
    Card("lt", "jaxpr", "logic", pairs=("stablehlo.compare",),
         words=("<", "compare", "less"),
         what="Computes `<` element by element and returns bools.",
         looks="`c:bool[4] = lt b 0:i32[]` followed by `add b 8` and a select_n is jnp wrapping "
               "negative indices to count from the end.",
         misread="Inside a while's `cond_jaxpr`, `lt i n` is the loop test; it lives in the "
                 "condition sub-jaxpr, not the body, and runs before every iteration."),
    Card("le", "jaxpr", "logic", pairs=("stablehlo.compare",),
         words=("<=", "compare"),
         what="Computes `<=` element by element and returns bools.",
         looks="`c = le a b`, no params; operand order matters, so `le x 0.0` and `le 0.0 x` ask "
               "opposite questions.",
         misread="Swapping le for lt only changes ties, which is exactly where a mask built from "
                 "iotas goes wrong (diagonal included or not)."),
    Card("gt", "jaxpr", "logic", pairs=("stablehlo.compare",),
         words=(">", "compare", "greater"),
         what="Computes `>` element by element and returns bools.",
         looks="`o:bool[] = gt j 0.0:f32[]` in the `_var` sub-jaxpr checks that n − ddof is "
               "positive before the division is trusted.",
         misread="In `jnp.var`, that gt and the select_n against NaN after it guard against ddof ≥ "
                 "n; the predicate is a scalar `bool[]`, not a mask over the data."),
    Card("ge", "jaxpr", "logic", pairs=("stablehlo.compare",),
         words=(">=", "compare"),
         what="Computes `>=` element by element and returns bools.",
         looks="`k:bool[128,128] = ge i j` between a row iota and a column iota is the "
               "lower-triangular mask that `jnp.tril` builds.",
         misread="The causal mask is not a stored input: it is rebuilt from two iotas on every "
                 "call, and XLA usually fuses it into the select that uses it."),
    Card("and", "jaxpr", "logic", pairs=("stablehlo.and",),
         what="Logical AND on bool arrays and bitwise AND on integers, element by element.",
         looks="`k = and h j`, no params; the operand avals tell logical from bitwise.",
         misread="On ints it is bitwise, so 6 and 3 gives 2, not True; not every `and` combines "
                 "masks."),
    Card("or", "jaxpr", "logic", pairs=("stablehlo.or",),
         what="Logical OR on bools and bitwise OR on integers, element by element.",
         looks="`c = or a b`, no params; in PRNG code it is bitwise, setting exponent bits on "
               "random integers before a bitcast_convert_type.",
         misread="It is not a reduction: `jnp.any` over an axis is reduce_or, while `or` combines "
                 "two arrays position by position."),
    Card("not", "jaxpr", "logic", pairs=("stablehlo.not",),
         what="Logical NOT on bools and bitwise complement on integers.",
         looks="`b = not a`, no params; Python's `~mask` emits it.",
         misread="On an int array it flips every bit, so not 0 is −1, not 1."),
    Card("xor", "jaxpr", "logic", pairs=("stablehlo.xor",),
         what="Exclusive OR, logical on bools and bitwise on integers.",
         looks="`c = xor a b`, no params; hashing and random-number code (threefry) is where it "
               "usually appears.",
         misread="On bools xor is the same test as ne, so two dumps may express identical mask "
                 "logic with different primitives."),
    Card("select_n", "jaxpr", "logic", pairs=("stablehlo.select",),
         words=("where", "jnp.where", "select", "if else"),
         what="Picks each output element from one of several same-shaped cases, chosen by a bool "
              "or integer `which` array; jnp.where and lax.select become it.",
         looks="`m = select_n g p e`: with a bool predicate False picks the first case and True "
               "the second, and jnp.where arrives wrapped in `jit[name=_where]`.",
         misread="Its case order is the reverse of `jnp.where(cond, x, y)`, which prints as "
                 "`select_n cond y x`, so reading the first case as the true branch flips the "
                 "mask."),
    # --- StableHLO ---
    Card("stablehlo.compare", "stablehlo", "logic", pairs=("eq", "ne", "lt", "le", "gt", "ge"),
         what="Compares two same-shaped tensors element by element under a named direction and "
              "returns an i1 tensor.",
         looks="`stablehlo.compare GT, %9, %cst_3, FLOAT`: the direction (EQ, NE, LT, LE, GT, GE) "
               "comes first and the comparison type (FLOAT, SIGNED, UNSIGNED, TOTALORDER) last.",
         misread="All six jaxpr comparisons become this one op, so read the direction keyword; "
                 "TOTALORDER inside sort comparators orders −0.0 and NaN instead of using IEEE "
                 "rules."),
    Card("stablehlo.and", "stablehlo", "logic", pairs=("and",),
         what="Elementwise AND: logical on i1, bitwise on integers.",
         looks="`%7 = stablehlo.and %5, %6 : tensor<i1>` inside argmax's reducer combines 'values "
               "equal' with 'index smaller'.",
         misread="Inside a reduce region it works on one pair of scalar candidates; it is part of "
                 "the tie-break rule (lowest index wins), not a mask over the array."),
    Card("stablehlo.or", "stablehlo", "logic", pairs=("or",),
         what="Elementwise OR: logical on i1, bitwise on integers.",
         looks="`%4 = stablehlo.or %2, %3 : tensor<i1>` in argmax's reducer: 'greater than' OR 'is "
               "NaN'.",
         misread="That NaN term is deliberate: argmax returns the position of a NaN if there is "
                 "one, so the or is not an artefact to ignore."),
    Card("stablehlo.not", "stablehlo", "logic", pairs=("not",),
         what="Elementwise NOT: logical on i1, bitwise complement on integers.",
         looks="`%1 = stablehlo.not %0 : tensor<8x16xi1>`, one operand and one type.",
         misread="Applied to a signed integer it gives −x − 1, so it is only a boolean negation "
                 "when the type is i1."),
    Card("stablehlo.xor", "stablehlo", "logic", pairs=("xor",),
         what="Elementwise exclusive OR, logical on i1 and bitwise on integers.",
         looks="`stablehlo.xor %a, %b : tensor<2xui32>` amid shifts and adds inside a "
               "stablehlo.while: the rounds of the threefry PRNG.",
         misread="A block of xor, shift and add in a dump that uses `jax.random` is the threefry "
                 "hash turning a key into random bits, not model math."),
    Card("stablehlo.select", "stablehlo", "logic", pairs=("select_n",),
         what="Picks elementwise between two tensors according to an i1 predicate: true takes the "
              "first, false the second.",
         looks="`%2 = stablehlo.select %arg0, %arg1, %1 : tensor<i1>, tensor<64x1xbf16>`; a scalar "
               "`tensor<i1>` predicate selects whole tensors.",
         misread="Its operand order is the reverse of the jaxpr's select_n, whose first case is "
                 "the false one; match lines across layers by the predicate, not by position."),
)
