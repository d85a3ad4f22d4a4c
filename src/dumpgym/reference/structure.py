"""Cards for the frame of a StableHLO module: containers, terminators and declarations."""
from dumpgym.reference.card import Card

# These ops carry no computation, but a reader meets them on every page, so each gets a short
# card rather than being skipped; none has a jaxpr counterpart, hence no pairs.
CARDS = (
    Card("builtin.module", "stablehlo", "structure",
         what="The top-level container of a lowered program, holding its functions and, when "
              "sharded, its mesh.",
         looks="`module @jit_layernorm attributes {mhlo.num_partitions = 1 : i32, "
               "mhlo.num_replicas = 1 : i32} { ... }`; the name is `jit_` plus the Python "
               "function's name.",
         misread="`mhlo.num_partitions = 8` is the number of devices an SPMD program runs on, not "
                 "a count of functions; there is no jaxpr counterpart op, the whole closed jaxpr "
                 "corresponds to the module."),
    Card("func.func", "stablehlo", "structure",
         words=("function", "@main", "donate", "donation", "tf.aliasing_output"),
         what="Defines a function: `@main` is the entry point, and private functions are outlined "
              "nested jits and helpers.",
         looks="`func.func public @main(%arg0: tensor<64x128xbf16>) -> (tensor<64x128xbf16> "
               "{jax.result_info = \"result\"})`, and `func.func private @_var(...)` for a nested "
               "jit.",
         misread="Several private functions are not several kernels or launches; they are call "
                 "targets XLA inlines, and apart from the `name` of a jaxpr `jit` they have no "
                 "jaxpr counterpart."),
    Card("func.return", "stablehlo", "structure",
         what="Returns values from a func.func.",
         looks="`return %19 : tensor<64x128xbf16>`, printed without its dialect prefix on the last "
               "line of each function.",
         misread="It plays the part of the jaxpr's closing `in (bj,) }` line, so it has no jaxpr "
                 "counterpart primitive and does not copy data."),
    Card("stablehlo.return", "stablehlo", "structure",
         what="Ends a region of a StableHLO op (a reduce body, a while's cond or do block, a case "
              "branch) and yields its values.",
         looks="`stablehlo.return %2 : tensor<f32>` inside `({ ^bb0(...): ... })` blocks; the "
               "short `applies stablehlo.add` form of reduce hides it.",
         misread="It returns from the enclosing region only, not from the function; the "
                 "sub-jaxpr's `in (...)` plays this role, so there is no jaxpr counterpart."),
    Card("sdy.return", "stablehlo", "structure",
         what="Ends an sdy.manual_computation body and yields its per-device results.",
         looks="`sdy.return %1 : tensor<8x16xf32>`, typed with the local, per-device shape.",
         misread="The global shape is on the manual_computation's result after the closing brace, "
                 "not here; like other terminators it has no jaxpr counterpart."),
    Card("sdy.mesh", "stablehlo", "structure",
         what="Declares a named device mesh at module level for Shardy shardings to refer to.",
         looks="`sdy.mesh @mesh = <[\"x\"=8]>`, after which shardings name it as `<@mesh, "
               "[{\"x\"}, {}]>`.",
         misread="It places no computation; it is a declaration with no jaxpr counterpart op, "
                 "mirroring the `mesh=Mesh('x': 8, ...)` param printed on shard_map."),
)
