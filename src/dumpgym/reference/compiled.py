"""Cards for compiled HLO: the notation of XLA's compiled listings (layouts, tiles, memory spaces) and the
opcodes they print that have no jaxpr or StableHLO spelling (fusion, bitcast, copy-start, all-reduce, …).

Names are as the compiled text prints them (`get-tuple-element`, `T(8,128)(2,1)`); `copy` and `while`
also name jaxpr primitives, so these cards are found with `card_for(name, layer="hlo")`.
"""
from dumpgym.reference.card import Card

CARDS = (
    # --- notation inside a compiled shape ---
    Card("{1,0}", "hlo", "layout",
         words=("layout", "row-major", "column-major", "minor-to-major", "strides"),
         what="The braces after a compiled shape give its layout: the axes listed from minor to major, the "
              "first being the axis whose neighbouring elements sit next to each other in memory.",
         looks="`f32[64,512]{1,0}` is row-major (axis 1 minor); `bf16[128,64]{0,1:T(8,128)(2,1)}` keeps axis 0 "
               "contiguous instead; a scalar prints `{}` or, tiled on a TPU, `{:T(256)}`.",
         misread="The list is minor first, so `{0,1}` on a matrix is column-major, not row-major; no StableHLO "
                 "counterpart prints it, since layouts are chosen only when XLA compiles."),
    Card("T(8,128)(2,1)", "hlo", "layout",
         words=("tile", "tiling", "padding", "tpu layout"),
         what="A tiled layout: after the colon each `T(...)` group is a tile, so the buffer is stored in blocks "
              "of that shape over its most minor axes, and a later group tiles the inside of each block.",
         looks="`bf16[64,128]{1,0:T(8,128)(2,1)}`: blocks of 8 by 128 with the 128 along the minor axis, and "
               "`(2,1)` pairs rows inside a block so two bf16 share a 32-bit word; f32 prints `T(8,128)` alone, "
               "a small array `T(4,128)`, a vector `T(256)` or `T(512)(128)(2,1)`.",
         misread="Every axis a tile covers is padded up to a multiple of it: `f32[3,5]{1,0:T(8,128)}` occupies "
                 "8×128×4 = 4096 bytes, not 60; the tile has no counterpart in the jaxpr or StableHLO."),
    Card("S(1)", "hlo", "memory",
         words=("memory space", "vmem", "hbm", "on-chip memory"),
         what="An `S(n)` closing a layout names the memory space the buffer lives in; a layout without one is "
              "in space 0, the chip's HBM.",
         looks="On a TPU `S(1)` is VMEM, the on-chip vector memory (`bf16[512,128]{1,0:T(8,128)(2,1)S(1)}` "
               "after a prefetch), `S(2)` holds semaphores such as a copy's `u32[]{:S(2)}` flag, and `S(5)` is "
               "host memory.",
         misread="It is not a sharding: shardings print as `sharding={...}` on the instruction, while `S(1)` "
                 "places one buffer; JAX's memory kinds (`device`, `pinned_host`) are its only counterpart."),
    Card("input_output_alias", "hlo", "memory",
         words=("donate", "donation", "donate_argnums", "buffer reuse", "aliasing"),
         what="The module header's map from outputs to the parameters whose buffers they may be written into: "
              "what `donate_argnums` asked for, as XLA accepted it.",
         looks="`HloModule jit_train_step, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: "
               "(1, {}, may-alias), ... }`: result member `{0}` may take over parameter 0's whole buffer (`{}`).",
         misread="It is permission, not a copy: no output is copied into the argument, and a donated argument that "
                 "no output matches in shape and dtype is simply not listed; its StableHLO counterpart is the "
                 "`tf.aliasing_output` attribute on @main's arguments."),
    # --- structure of a compiled module ---
    Card("fusion", "hlo", "structure",
         words=("fused", "kernel", "kLoop", "kInput", "kOutput", "kCustom", "fused_computation",
                "gemm", "gemm_fusion", "triton", "matmul"),
         what="Runs a computation XLA built by merging instructions, so that the values between them stay on "
              "chip instead of going through memory.",
         looks="`%fusion.14 = bf16[64,128]{...} fusion(%copy-done, %x.1, ...), kind=kOutput, "
               "calls=%fused_computation.15`: the body is the computation in `calls=`, its parameters the "
               "operands in order; `kind` is kLoop (elementwise), kInput (ending in a reduction), kOutput "
               "(built around a convolution or dot) or kCustom (handed to a code generator of the backend's "
               "own, named in its backend_config: Triton's `__triton_nested_gemm_fusion` on a GPU, "
               "`__ynn_fusion` on a CPU).",
         misread="The name says little (`%add_rsqrt_fusion`, `%fusion.3` are XLA's), one fusion can hold many "
                 "equations and one equation can be spread over several; the jaxpr and StableHLO have no "
                 "counterpart, since fusion happens inside XLA."),
    Card("parameter", "hlo", "structure",
         words=("argument", "input", "fusion parameter"),
         what="An input of a computation, numbered by position.",
         looks="`%x.1 = bf16[64,128]{1,0:T(8,128)(2,1)} parameter(0), metadata={op_name=\"x\"}` in the ENTRY "
               "computation is your argument `x`; inside a fused computation `%param_0.46 = ... parameter(0)` is "
               "the fusion's first operand.",
         misread="Inside a fusion a parameter is not a program argument, and its layout can differ from the "
                 "caller's (an `S(1)` parameter reads from VMEM); the jaxpr's counterpart is a binder after "
                 "`lambda`."),
    Card("constant", "hlo", "creation",
         compiled_from=("stablehlo.constant",),
         what="A literal value compiled into the program.",
         looks="`%constant.22 = bf16[]{:T(256)} constant(0.04468)`: a scalar prints its value, a large array "
               "`{...}`; on a TPU even a scalar has a tile.",
         misread="A filled array is usually a scalar constant and a `broadcast`, often inside a fusion, not an "
                 "array constant; StableHLO's counterpart is `stablehlo.constant` before XLA folded it."),
    Card("tuple", "hlo", "structure",
         what="Groups several values into one tuple-shaped value: a computation's several results, or a "
              "multi-output fusion's root.",
         looks="`ROOT %tuple = (bf16[64]{0:T(256)(128)(2,1)S(1)}, f32[64]{0:T(128)S(1)}) tuple(%a, %b)`.",
         misread="Nothing is copied: a tuple is a list of buffers and costs nothing at run time; its StableHLO "
                 "counterpart is a `return` of several values."),
    Card("get-tuple-element", "hlo", "structure",
         what="Takes one member out of a tuple-shaped value, by position.",
         looks="`%get-tuple-element.1 = f32[64]{0:T(128)} get-tuple-element(%fusion.2), index=1`: each output of "
               "a multi-output fusion is read this way.",
         misread="It moves no data, it only names a buffer the tuple's maker already wrote; there is no jaxpr "
                 "counterpart, where an equation simply binds several outvars."),
    Card("bitcast", "hlo", "shape",
         compiled_from=("stablehlo.reshape",),
         what="Reinterprets a buffer as another shape or layout without touching a byte: only the indexing of "
              "the same memory changes.",
         looks="`%bitcast.1 = bf16[512,128]{1,0:T(8,128)(2,1)} bitcast(%bitcast_input.1)`; a TPU compile often "
               "wraps one alone in a kLoop `bitcast_fusion`.",
         misread="It is not `lax.bitcast_convert_type` (the dtype stays) and not a copy; a reshape or transpose "
                 "that must move data prints as a `copy` or a fusion, and no StableHLO counterpart exists."),
    Card("copy", "hlo", "memory",
         words=("layout change", "relayout"),
         what="Writes its operand into a new buffer, to change its layout (which axis is minor, which tile) or "
              "its memory space.",
         looks="`%copy = bf16[128,64]{1,0:T(8,128)(2,1)S(1)} copy(%copy-done.1)`: compare the layout in braces "
               "with the operand's to see what changed, here `{0,1}` to `{1,0}`.",
         misread="It keeps the logical shape, and mostly the values, but it may convert as it copies: "
                 "fsdp-step's TPU compile copies `w_out` from f32 into a bf16 buffer; compare the dtypes as well as "
                 "the layouts. The jaxpr's `copy` primitive is another thing, and this one has no StableHLO "
                 "counterpart."),
    Card("copy-start", "hlo", "memory",
         words=("prefetch", "async copy", "dma", "vmem"),
         what="Starts an asynchronous copy, on a TPU typically a prefetch from HBM into VMEM, that runs while "
              "other instructions compute.",
         looks="`%copy-start = (bf16[512,128]{...S(1)}, bf16[512,128]{...}, u32[]{:S(2)}) copy-start(%w2.1), "
               "cross_program_prefetch_index=0`: a tuple of the destination, the source and a semaphore flag.",
         misread="When it appears nothing has arrived yet: the data is ready at the matching `copy-done`, and "
                 "whatever is scheduled between the two overlaps the transfer; XLA adds it, with no counterpart "
                 "in the jaxpr."),
    Card("copy-done", "hlo", "memory",
         words=("prefetch", "async copy", "dma"),
         what="Waits for a copy-start's transfer to finish and yields the copied buffer.",
         looks="`%copy-done = bf16[512,128]{1,0:T(8,128)(2,1)S(1)} copy-done(%copy-start)`: its operand is the "
               "copy-start's tuple, its result the destination, here in VMEM.",
         misread="It is not a second copy: the pair is one transfer split in two so the scheduler can put work "
                 "in between; StableHLO has no counterpart."),
    # --- compute ---
    Card("broadcast", "hlo", "shape",
         compiled_from=("stablehlo.broadcast_in_dim",),
         what="Copies its operand into a larger array: operand axis i becomes the output axis that "
              "`dimensions` lists at position i, and every other output axis repeats it.",
         looks="`%add.51 = bf16[64,512]{...} broadcast(%param_2.38), dimensions={1}` spreads a bias over the "
               "rows; a scalar prints `dimensions={}`.",
         misread="XLA names it after the equation that needed it (`%add.51` is a broadcast), so read the "
                 "opcode, not the name; its StableHLO counterpart is `stablehlo.broadcast_in_dim`."),

    Card("convolution", "hlo", "contraction",
         words=("matmul", "gemm", "mxu"), compiled_from=("stablehlo.convolution", "stablehlo.dot_general"),
         what="On a TPU, XLA writes matrix multiplies as convolutions, so a dot_general of yours usually "
              "prints as this opcode and runs on the MXU, the matrix unit.",
         looks="`%convolution.11 = bf16[64,512]{...} convolution(%fusion.21, %fusion.23), dim_labels=bf_io->bf`: "
               "`b` and `f` label the lhs's free and contracted axes, `i` and `o` the rhs's contracted and output "
               "axes, so `bf_io->bf` is `x @ w` and `bf_oi->bf` is `x @ w.T`.",
         misread="With no `window=` attribute nothing slides: it is a matmul, not an image convolution; its "
                 "StableHLO counterpart is usually `stablehlo.dot_general`, not `stablehlo.convolution`."),
    Card("dot", "hlo", "contraction",
         words=("matmul", "gemm"), compiled_from=("stablehlo.dot_general",),
         what="A matrix multiply with its axes spelled out, how the CPU compile prints a dot_general.",
         looks="`%dot_general.0 = f32[64,128]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, "
               "rhs_contracting_dims={0}`, plus `lhs_batch_dims` and `rhs_batch_dims` when there are batch axes.",
         misread="XLA may fold a transpose into the dot, so its axis lists need not be the jaxpr's; on a TPU the "
                 "same work usually prints as `convolution`, and its StableHLO counterpart is "
                 "`stablehlo.dot_general`."),
    Card("custom-call", "hlo", "control",
         words=("kernel", "cublas", "custom call", "gemm", "__cublas$gemm", "cudnn", "pallas", "mosaic"),
         compiled_from=("stablehlo.custom_call",),
         what="Runs a kernel XLA does not generate from HLO, named by `custom_call_target`; on a TPU "
              "`tpu_custom_call` is a Mosaic kernel, which Pallas writes and XLA's TPU compiler also uses for "
              "its own.",
         looks="`%online-softmax = bf16[128,64]{...S(1)} custom-call(%fusion, %copy), "
               "custom_call_target=\"tpu_custom_call\", ...`: the kernel's compiled body travels base64-encoded "
               "in `backend_config`.",
         misread="XLA shows only its operands and result, so no equation maps into it line by line; its "
                 "StableHLO counterpart, when you wrote one, is `stablehlo.custom_call`."),
    Card("online-softmax", "hlo", "control",
         words=("softmax", "attention", "flash attention"),
         what="A kernel XLA's TPU compiler put in by itself for an attention pattern: it applies the softmax "
              "and the multiply by the values in one pass, keeping a running maximum and sum.",
         looks="In the attention program's TPU compile, `%online-softmax = ... custom-call(%fusion, %copy), "
               "custom_call_target=\"tpu_custom_call\"` with `metadata={op_name=\"online-softmax\"}`, after the "
               "fusion that computes `q @ k.T`.",
         misread="You did not write it and no jaxpr equation is named for it: the max, exp, sum, divide and "
                 "second matmul of your softmax all went into this one kernel, which has no counterpart at the "
                 "other layers."),
    # --- control flow ---
    Card("while", "hlo", "control",
         words=("loop",), compiled_from=("stablehlo.while",),
         what="A compiled loop: runs its body computation as long as its condition computation returns true, "
              "over one tuple of loop state.",
         looks="`%while = (s32[], f32[8,4]{1,0}) while(%tuple), condition=%cond, body=%body`: the state goes in "
               "as a tuple, and the body reads it with get-tuple-element.",
         misread="Not every while is a loop you wrote: dropout has no loop, yet its CPU compile runs "
                 "threefry's rounds in one, while every lax.scan here (rnn-bptt's two, scan-layers') stays a "
                 "while on each backend; the scan program has none, since lax.associative_scan unrolls at "
                 "trace time. Its StableHLO counterpart is `stablehlo.while`."),
    Card("conditional", "hlo", "control",
         words=("if", "branch"), compiled_from=("stablehlo.case",),
         what="Runs one of several branch computations, picked at run time by a predicate or an index.",
         looks="`%conditional = f32[8]{0} conditional(%p, %a, %b), true_computation=%t, false_computation=%f`, "
               "or `branch_computations={%b0, %b1}` with an s32 index.",
         misread="Only the chosen branch runs, though both are compiled; XLA may also turn a cheap one into a "
                 "`select` that computes both, and its StableHLO counterpart is `stablehlo.case`."),
    # --- collectives ---
    Card("all-reduce", "hlo", "collective",
         compiled_from=("stablehlo.all_reduce",),
         what="Combines a buffer across the devices of each replica group with the `to_apply` computation and "
              "gives every one of them the result.",
         looks="`all-reduce(%fusion), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, "
               "use_global_device_ids=true, to_apply=%region_0.0`: each inner pair of braces is one group of "
               "device ids.",
         misread="With `use_global_device_ids=true` the numbers are ids over all the program's devices, not "
                 "positions along one mesh axis; the StableHLO counterpart is `stablehlo.all_reduce`."),
    Card("all-gather", "hlo", "collective",
         compiled_from=("stablehlo.all_gather",),
         what="Concatenates every device's block along one dimension, so each device of a group ends up with "
              "all of them.",
         looks="`all-gather(%x), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, "
               "use_global_device_ids=true`: `dimensions` names the axis that grows by the group's size.",
         misread="The result is larger than the operand by the group size along `dimensions`; nothing is "
                 "summed; the StableHLO counterpart is `stablehlo.all_gather`."),
    Card("reduce-scatter", "hlo", "collective",
         compiled_from=("stablehlo.reduce_scatter",),
         what="Sums (or otherwise combines) a buffer across a group and leaves each device one slice of the "
              "total along a dimension.",
         looks="`reduce-scatter(%x), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%add`: the result is "
               "the operand's size divided by the group size along `dimensions`.",
         misread="It is an all-reduce whose result is split, not a scatter by indices; the StableHLO "
                 "counterpart is `stablehlo.reduce_scatter`."),
    Card("collective-permute", "hlo", "collective",
         compiled_from=("stablehlo.collective_permute",),
         what="Sends each device's buffer to one other device, following a fixed list of pairs.",
         looks="`collective-permute(%x), channel_id=3, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}` is a ring "
               "shift by one.",
         misread="A device that is no pair's target receives zeros; the StableHLO counterpart is "
                 "`stablehlo.collective_permute`, from `ppermute`."),
    Card("replica-id", "hlo", "collective",
         words=("device id", "replica"),
         what="The index of the replica this copy of the program runs as: a u32 scalar, the same on every "
              "device of one replica.",
         looks="`%replica-id = u32[]{:S(6)} replica-id()`, often multiplied by the partition count and added "
               "to a `partition-id()` to make a global device id (a collective-permute's sender on a TPU).",
         misread="A program partitioned over a mesh (num_replicas = 1) has one replica, so it is 0 there and the "
                 "device's position is the `partition-id`; no equation emits it: XLA adds it for its own "
                 "indexing, so it has no tag and no counterpart in the jaxpr or StableHLO JAX wrote."),
    Card("all-to-all", "hlo", "collective",
         compiled_from=("stablehlo.all_to_all",),
         what="Splits each device's buffer into pieces and sends piece i to the group's i-th device, which "
              "joins what it receives.",
         looks="`all-to-all(%x), replica_groups={{0,1,2,3}}, dimensions={1}`: the split and the concatenation "
               "run along `dimensions`.",
         misread="It redistributes without combining anything: the total amount of data stays the same; the "
                 "StableHLO counterpart is `stablehlo.all_to_all`."),
    Card("all-reduce-start", "hlo", "collective",
         words=("async", "overlap"), compiled_from=("stablehlo.all_reduce",),
         what="Begins an all-reduce without waiting for it, so independent instructions can run while the "
              "devices exchange data.",
         looks="`%all-reduce-start = f32[16,16]{...} all-reduce-start(%x), replica_groups={...}, "
               "to_apply=%add`, later finished by `all-reduce-done(%all-reduce-start)`.",
         misread="The start and its done are one collective split in two by XLA's scheduler, not two "
                 "reductions; there is no counterpart in StableHLO, which has only `stablehlo.all_reduce`."),
    Card("all-reduce-done", "hlo", "collective",
         compiled_from=("stablehlo.all_reduce",),
         what="Waits for the all-reduce its operand started and yields the combined result.",
         looks="`%all-reduce-done = f32[16,16]{...} all-reduce-done(%all-reduce-start)`.",
         misread="The work between the start and this done overlaps the exchange; a done right after its "
                 "start means nothing could overlap, and neither half has a jaxpr counterpart."),
    Card("all-gather-start", "hlo", "collective",
         words=("async", "overlap"), compiled_from=("stablehlo.all_gather",),
         what="Begins an all-gather without waiting for it; `all-gather-done` yields the gathered buffer.",
         looks="`%all-gather-start = (f32[2,4]{...}, f32[8,4]{...}) all-gather-start(%x), dimensions={0}, "
               "replica_groups={...}`: a tuple of the operand and the result being filled.",
         misread="Read the second member of its tuple for the result's shape; the asynchronous split itself has "
                 "no counterpart in StableHLO."),
    Card("all-gather-done", "hlo", "collective",
         compiled_from=("stablehlo.all_gather",),
         what="Waits for an all-gather-start and yields the gathered buffer, every device's block in place.",
         looks="`%all-gather-done = f32[8,4]{...} all-gather-done(%all-gather-start)`.",
         misread="It gathers nothing itself: the data moved between its start and it; the jaxpr knows only "
                 "`all_gather`, so it has no counterpart there."),
    Card("reduce-scatter-start", "hlo", "collective",
         words=("async", "overlap"), compiled_from=("stablehlo.reduce_scatter",),
         what="Begins a reduce-scatter without waiting for it: each device's block of the sum over the group "
              "is being filled while other work runs; `reduce-scatter-done` yields it.",
         looks="`%reduce-scatter-start = ((f32[64,32]{1,0}, f32[64,32]{1,0}), (f32[32,32]{1,0}, f32[32,32]{1,0})) "
               "reduce-scatter-start(%a, %b), replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}, to_apply=%add`: "
               "a tuple of the operands (whole) and the results (each device's block, cut along `dimensions`); "
               "XLA may combine several reduce-scatters into one start.",
         misread="Read the second member of its tuple for the results' shapes; the asynchronous split itself has "
                 "no counterpart in StableHLO, and the jaxpr's `reduce_scatter` (`psum_scatter`) is one step."),
    Card("reduce-scatter-done", "hlo", "collective",
         compiled_from=("stablehlo.reduce_scatter",),
         what="Waits for a reduce-scatter-start and yields each device's block of the summed result.",
         looks="`%reduce-scatter-done = (f32[32,32]{1,0}, f32[32,32]{1,0}) reduce-scatter-done(%reduce-scatter-start)`: "
               "one block per combined reduce-scatter; `get-tuple-element` picks each out.",
         misread="It sums nothing itself: the data moved and was added between its start and it; the jaxpr knows "
                 "only `reduce_scatter`, so it has no counterpart there."),
    Card("collective-permute-start", "hlo", "collective",
         words=("async", "overlap"), compiled_from=("stablehlo.collective_permute",),
         what="Begins sending buffers between devices along fixed pairs, without waiting for them to arrive.",
         looks="`%collective-permute-start = (...) collective-permute-start(%x), "
               "source_target_pairs={{0,1},{1,0}}`, finished by `collective-permute-done`.",
         misread="Pipelined code overlaps this send with a matmul on purpose; the pair is one `ppermute`, and "
                 "StableHLO has no asynchronous counterpart."),
    Card("collective-permute-done", "hlo", "collective",
         compiled_from=("stablehlo.collective_permute",),
         what="Waits for a collective-permute-start and yields the buffer this device received.",
         looks="`%collective-permute-done = f32[2,4]{...} collective-permute-done(%collective-permute-start)`.",
         misread="The result is what arrived from the source device, not this device's own data; the jaxpr "
                 "counterpart of the whole pair is `ppermute`, of this half none."),
)
