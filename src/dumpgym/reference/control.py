"""Cards for calls, loops and branches, and for the ops autodiff leaves in a dump."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr: control ---
    Card("jit", "jaxpr", "control", pairs=("func.call",),
         words=("nested jit", "call"),
         what="Calls a nested, separately traced function. Every inner `jax.jit` appears as one, "
              "and so do many jnp helpers (jnp.var, jnp.where, jnp.tril, one_hot, argsort).",
         looks="`bb = jit[name=_var jaxpr=_var] t 0:i32[]`: `name` is the Python function's name, "
               "and a sub-jaxpr may be printed once at the top as `let _var = { lambda ... } in` "
               "and referred to by name.",
         misread="It does not mean a separate kernel: the call becomes a `func.call` that XLA "
                 "inlines and optimises across; `pjit` is an older name for the same primitive."),
    Card("scan", "jaxpr", "control", pairs=("stablehlo.while",),
         words=("loop", "lax.scan", "fori_loop", "for loop"),
         what="Loops a body jaxpr over the leading axis of its inputs a fixed number of times, "
              "threading carry values between iterations; lax.scan and fori_loop with static "
              "bounds make it.",
         looks="`scan[jaxpr={...} length=8 num_carry=1 num_consts=0 reverse=False unroll=1]`: "
               "operands are consts, then carries, then scanned inputs, and outvars are the final "
               "carries, then the stacked per-step results.",
         misread="lax.associative_scan and jnp.cumsum do not produce it, and a fori_loop with "
                 "traced bounds gives `while` instead; a literal scan eqn means lax.scan or a "
                 "static fori_loop."),
    Card("while", "jaxpr", "control", pairs=("stablehlo.while",),
         words=("loop", "while_loop", "fori_loop"),
         what="Repeats a body jaxpr while a condition jaxpr returns true, with no trip count fixed "
              "at trace time; lax.while_loop and fori_loop with traced bounds make it.",
         looks="`while[body_jaxpr={...} body_nconsts=0 cond_jaxpr={...} cond_nconsts=0] 0:i32[] "
               "a`: the operands are the cond consts, the body consts, then the loop state.",
         misread="It cannot be reverse-differentiated (jax.grad through a while_loop fails), so a "
                 "while in a training step is forward-only code; scan is the loop that grad can go "
                 "through."),
    Card("cond", "jaxpr", "control", pairs=("stablehlo.case",),
         words=("if", "switch", "branch", "lax.cond"),
         what="Runs exactly one of several branch jaxprs, chosen by an integer index at run time; "
              "lax.cond and lax.switch produce it.",
         looks="`cond[branches=(...)] d a`: the first operand is the index, and with a bool "
               "predicate JAX first converts it to int32, so branch 0 is the false branch.",
         misread="`lax.cond(pred, f_true, f_false)` prints its branches false first, the opposite "
                 "of the call; and under vmap a batched predicate turns the cond into both "
                 "branches plus a select_n."),
    # --- jaxpr: autodiff ---
    Card("stop_gradient", "jaxpr", "autodiff",
         words=("detach", "no gradient"),
         what="Marks a value as a constant for differentiation: forward it is the identity, "
              "backward it passes no gradient.",
         looks="`t = stop_gradient s`, no params; in this version jax.nn.softmax applies it to the "
               "row maximum before subtracting it.",
         misread="It computes nothing: it has no StableHLO counterpart and vanishes on lowering, "
                 "so only the jaxpr shows where gradients were cut."),
    Card("add_any", "jaxpr", "autodiff", pairs=("stablehlo.add",),
         words=("gradient accumulation",),
         what="Adds two gradient contributions to the same value; autodiff emits it wherever a "
              "forward value was used more than once.",
         looks="`be:f32[32,32] = add_any bb bd` in the grads dump, with no params.",
         misread="It is plain addition that lowers to stablehlo.add; the name only records that "
                 "autodiff, not your code, put it there."),
    Card("custom_jvp_call", "jaxpr", "autodiff",
         words=("custom_jvp", "custom gradient"),
         what="Calls a function that carries a hand-written JVP rule, such as jax.nn.relu; the "
              "printed body is what runs forward.",
         looks="`custom_jvp_call[name=relu call_jaxpr={...} jvp=jvp symbolic_zeros=False] a`: "
               "`call_jaxpr` is the forward computation and `jvp` is only a Python function's "
               "name.",
         misread="The printed body does not tell you the derivative, because the rule is Python "
                 "code outside the jaxpr; and the call has no StableHLO counterpart, its body is "
                 "inlined."),
    Card("custom_vjp_call", "jaxpr", "autodiff",
         words=("custom_vjp", "custom gradient"),
         what="Calls a function with a hand-written forward and backward pair (jax.custom_vjp); "
              "the printed body is the primal computation.",
         looks="`custom_vjp_call[name=cv bwd=<lambda> call_jaxpr={...} fwd=<lambda> "
               "symbolic_zeros=False] a`: `fwd` and `bwd` are Python callables shown only by name.",
         misread="Taking jax.grad does not give you `bwd` as a sub-jaxpr to read; its ops appear "
                 "inlined in the grad jaxpr, and the call itself has no StableHLO counterpart."),
    Card("remat2", "jaxpr", "autodiff", pairs=("stablehlo.optimization_barrier",),
         words=("jax.checkpoint", "rematerialization", "recompute", "activation checkpointing"),
         what="Wraps a sub-jaxpr whose intermediates should be recomputed in the backward pass "
              "instead of stored; jax.checkpoint (alias jax.remat) produces it.",
         looks="`remat2[differentiated=False jaxpr={...} policy=None prevent_cse=True]`: `policy` "
               "says what may be saved, and `differentiated=True` marks the copy inside a backward "
               "pass.",
         misread="Without a grad it changes nothing and lowers to its inlined body; only under "
                 "jax.grad does it show in StableHLO, as an optimization_barrier that stops XLA "
                 "from merging the recomputation with the forward pass."),
    # --- StableHLO ---
    Card("func.call", "stablehlo", "control", pairs=("jit",),
         what="Calls a private function defined elsewhere in the module; JAX emits one for each "
              "nested jit and for primitives lowered through helper functions (argmax, cumsum).",
         looks="Printed `%6 = call @_var(%arg0, %c)` at the top level but `func.call "
               "@closed_call(...)` inside regions such as a while body; the callee is a `func.func "
               "private`.",
         misread="It is not a runtime call boundary on the device: XLA inlines these functions, so "
                 "a call line costs nothing by itself."),
    Card("stablehlo.while", "stablehlo", "control", pairs=("scan", "while"),
         what="A loop with a condition region and a body region over a list of loop-carried "
              "values.",
         looks="`%2:4 = stablehlo.while(%iterArg = %arg0, %iterArg_1 = %c, ...) cond { ... } do { "
               "... }`; a lowered scan carries an explicit i32 counter compared with LT against "
               "its length.",
         misread="lax.scan and lax.while_loop both become this op, so a StableHLO while does not "
                 "tell you whether the trip count was fixed; look for the counter compare."),
    Card("stablehlo.case", "stablehlo", "control", pairs=("cond",),
         what="Runs one of several regions, selected by an i32 index, and returns that region's "
              "results.",
         looks="`\"stablehlo.case\"(%2) ({ ... }, { ... })`, one region per branch, each ending in "
               "`stablehlo.return`.",
         misread="An out-of-range index runs the last region rather than failing, which is why "
                 "lax.switch clamps its index first; with a converted bool, region 0 is the false "
                 "branch."),
    Card("stablehlo.custom_call", "stablehlo", "control", pairs=("pallas_call",),
         words=("kernel", "custom call"),
         what="Calls a backend target by name, the escape hatch for work StableHLO has no op for: "
              "library kernels, Pallas kernels, FFI calls, and sharding markers in the older GSPMD lowering.",
         looks="`stablehlo.custom_call @tpu_custom_call(%2, %arg1) {backend_config = ...}` for a Pallas TPU "
               "kernel, or `@Sharding(%arg0) {mhlo.sharding = \"{devices=[1,8]<=[8]}\"}`; the `@name` is the "
               "target.",
         misread="A pallas_call is not the only source: on a CPU `jnp.linalg.cholesky` lowers to "
                 "`@lapack_spotrf_ffi`, LAPACK called through XLA's FFI, and `jax.pure_callback` to "
                 "`@xla_ffi_python_cpu_callback`, a call back into your Python; JAX 0.10.2 lowers sharding "
                 "through `sdy` ops by default, so a @Sharding custom_call means the older GSPMD path was used."),
    Card("stablehlo.optimization_barrier", "stablehlo", "autodiff", pairs=("remat2",),
         words=("barrier",),
         what="Passes its operands through unchanged while stopping XLA from moving computation "
              "across it.",
         looks="`%1:2 = stablehlo.optimization_barrier %arg0, %0 : tensor<8x16xf32>, "
               "tensor<8x16xf32>`, just before the recomputed forward ops of a checkpointed "
               "backward pass.",
         misread="It computes nothing and is not a synchronisation between devices; it exists so "
                 "common-subexpression elimination cannot reuse forward values that jax.checkpoint "
                 "meant to recompute."),
)
