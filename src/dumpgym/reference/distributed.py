"""Cards for collectives and sharding: ops that only mean something across devices."""
from dumpgym.reference.card import Card

CARDS = (
    # --- jaxpr: collectives ---
    Card("psum", "jaxpr", "collective", pairs=("stablehlo.all_reduce",),
         words=("all-reduce", "sum over devices", "lax.psum"),
         what="Sums a value across the devices of the named mesh axes inside shard_map, giving "
              "every device the total.",
         looks="`e:f32[1,4] = psum[axes=('x',) axis_index_groups=None] d`; it prints as psum when "
               "shard_map runs with `check_vma=False`, and as psum_invariant otherwise.",
         misread="Older shard_map dumps show a `psum2` primitive; JAX 0.10.2 has none, and a "
                 "`lax.psum` you wrote appears as psum or psum_invariant."),
    Card("psum_invariant", "jaxpr", "collective", pairs=("stablehlo.all_reduce",),
         what="The all-reduce sum shard_map records for lax.psum when it checks varying manual "
              "axes (the default): it turns a per-device value into one that is the same on every "
              "device.",
         looks="`g:f32[16,16] = psum_invariant[axes=('x',)] f`: the invar's aval carries `{V:x}` "
               "and the outvar's does not, the type-level record that the sum made it invariant.",
         misread="It is the psum you wrote, not an extra op; its transpose in a gradient is pvary "
                 "and the other way round, so a backward shard_map body swaps one for the other."),
    Card("pmax", "jaxpr", "collective", pairs=("stablehlo.all_reduce",),
         what="Takes the elementwise maximum of a value across the devices of the named axes.",
         looks="`f:f32[1,4] = pmax[axes=('x',) axis_index_groups=None] d`, lowered to a "
               "stablehlo.all_reduce whose region holds a maximum.",
         misread="It is not a reduction over the array's own axes: the shape is unchanged, each "
                 "element is compared with the same element on the other devices."),
    Card("pmin", "jaxpr", "collective", pairs=("stablehlo.all_reduce",),
         what="Takes the elementwise minimum of a value across the devices of the named axes.",
         looks="`pmin[axes=('x',) axis_index_groups=None] d`; the lowered all_reduce region holds "
               "a stablehlo.minimum.",
         misread="Like every all-reduce its outvar has the invar's shape; if the shape shrank you "
                 "are looking at reduce_min, not pmin."),
    Card("all_gather", "jaxpr", "collective", pairs=("stablehlo.all_gather",),
         words=("gather over devices", "lax.all_gather"),
         what="Collects every device's block along a named mesh axis so that each device holds all "
              "of them, concatenated or stacked.",
         looks="`all_gather[all_gather_dimension=0 axis_index_groups=None axis_name=('x',) "
               "axis_size=8 tiled=True]`: `tiled=True` concatenates (f32[1,4] to f32[8,4]), while "
               "`tiled=False` stacks along a new axis of size `axis_size`.",
         misread="With `tiled=False` the StableHLO adds a size-1 axis with broadcast_in_dim before "
                 "gathering; that is the new stacking axis, not a stray reshape."),
    Card("ppermute", "jaxpr", "collective", pairs=("stablehlo.collective_permute",),
         words=("collective permute", "ring", "send"),
         what="Sends each device's value to another device along a mesh axis according to a static "
              "list of (source, destination) pairs.",
         looks="`ppermute[axis_name=('x',) perm=((0, 1), (1, 2), ..., (7, 0))] c` is a ring shift "
               "by one position.",
         misread="A device that is nobody's destination receives zeros, so a partial perm silently "
                 "zero-fills; and the numbers are positions along the axis, not physical device "
                 "ids."),
    Card("all_to_all", "jaxpr", "collective", pairs=("stablehlo.all_to_all",),
         words=("lax.all_to_all",),
         what="Splits each device's block along `split_axis`, sends piece i to device i, and "
              "concatenates what arrives along `concat_axis`.",
         looks="`all_to_all[axis_index_groups=None axis_name=x concat_axis=1 split_axis=1 "
               "tiled=True] c`.",
         misread="It moves data without combining it: the total is unchanged, it re-distributes "
                 "which device holds which piece (expert-parallel dispatch, or switching the "
                 "sharded axis)."),
    Card("reduce_scatter", "jaxpr", "collective", pairs=("stablehlo.reduce_scatter",),
         words=("psum_scatter",),
         what="Sums a value across devices and leaves each device only its slice of the total "
              "along `scatter_dimension`; `lax.psum_scatter` emits it.",
         looks="`reduce_scatter[axis_index_groups=None axis_name=('x',) axis_size=8 "
               "scatter_dimension=0 tiled=True] c` takes `f32[8,8]` to `f32[1,8]` on each device.",
         misread="The primitive is named reduce_scatter although the API is psum_scatter; it "
                 "equals a psum followed by taking this device's slice, with less communication."),
    Card("axis_index", "jaxpr", "collective", pairs=("stablehlo.partition_id",),
         words=("device id", "rank", "partition id"),
         what="Returns this device's position along a named mesh axis as an int32 scalar.",
         looks="`d:i32[]{V:x} = axis_index[axis_name=x]` has no operands, and its outvar is marked "
               "varying (`{V:x}`).",
         misread="It is a coordinate in the mesh, not a global device id; in StableHLO it becomes "
                 "a partition_id followed by a divide and a remainder that extract the "
                 "coordinate."),
    # --- jaxpr: sharding ---
    Card("pvary", "jaxpr", "sharding",
         what="Marks a device-invariant value as varying over the named axes without changing any "
              "data, so it can meet per-device values under shard_map's type checks.",
         looks="`f:f32[32,16]{V:x} = pvary[axes=('x',)] e`: the only visible change is the `{V:x}` "
               "on the outvar; `jax.lax.pcast(..., to='varying')` is how you write it by hand.",
         misread="It is not a collective and sends nothing: it has no StableHLO counterpart and "
                 "lowers to nothing, although its transpose in a gradient is a real psum."),
    Card("shard_map", "jaxpr", "sharding", pairs=("sdy.manual_computation",),
         words=("manual sharding", "per-device", "spmd", "pmap"),
         what="Runs a per-device body jaxpr on the local shards of its inputs over a mesh, with "
              "any collectives written explicitly inside.",
         looks="`shard_map[check_vma=True in_specs=(P('x', None), P(None, None)) jaxpr={...} "
               "mesh=Mesh('x': 8, ...) newly_manual_axes=frozenset({'x'}) out_specs=(P('x', "
               "None),)]`; outside, `f32[64@x,32]` marks the sharded axis.",
         misread="The body's avals are per device: `f32[8,32]{V:x}` inside is one shard of "
                 "`f32[64@x,32]` outside, so reading it as the whole array undercounts by the axis "
                 "size."),
    Card("reshard", "jaxpr", "sharding", pairs=("sdy.sharding_constraint",),
         words=("device_put", "sharding"),
         what="Moves an array to a new sharding on an explicit-axis mesh; `jax.sharding.reshard` "
              "and some autodiff steps emit it.",
         looks="`b:f32[8,4] = reshard a` hides its `dst_sharding` param, so compare avals: "
               "`f32[8@x,4]` becoming `f32[8,4]` means the x-sharding was removed.",
         misread="It looks like a no-op because dtype and shape agree, but once XLA partitions the "
                 "program it can be a real all-gather or all-to-all."),
    # --- StableHLO ---
    Card("stablehlo.all_reduce", "stablehlo", "collective",
         pairs=("psum", "psum_invariant", "pmax", "pmin"),
         what="Combines a tensor across the devices of each replica group with the reduction in "
              "its region and gives every device the result.",
         looks="Generic form: `\"stablehlo.all_reduce\"(%0) <{channel_handle = ..., replica_groups "
               "= dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({ "
               "... stablehlo.add ... })`.",
         misread="The add inside the region combines two scalars, it is not an extra addition; and "
                 "`replica_groups` lists devices that reduce together, so `[[0, ..., 7]]` is one "
                 "group of eight."),
    Card("stablehlo.all_gather", "stablehlo", "collective", pairs=("all_gather",),
         what="Concatenates the tensors of the devices in each replica group along "
              "`all_gather_dim`.",
         looks="`\"stablehlo.all_gather\"(%arg1) <{all_gather_dim = 0 : i64, ...}> : "
               "(tensor<1x4xf32>) -> tensor<8x4xf32>`.",
         misread="It always concatenates, growing one dimension by the group size; a stacking "
                 "all_gather shows up as a broadcast_in_dim before it plus this concatenation."),
    Card("stablehlo.collective_permute", "stablehlo", "collective", pairs=("ppermute",),
         what="Sends a tensor from each source device to a target device as listed in "
              "`source_target_pairs`.",
         looks="`\"stablehlo.collective_permute\"(%arg1) <{source_target_pairs = dense<[[0, 1], "
               "[1, 2], ..., [7, 0]]> : tensor<8x2xi64>}>`.",
         misread="Its name differs from the jaxpr's ppermute, and its pairs are device numbers: on "
                 "a one-axis mesh they equal axis positions, on a multi-axis mesh they do not."),
    Card("stablehlo.all_to_all", "stablehlo", "collective", pairs=("all_to_all",),
         what="Splits a tensor along `split_dimension` into `split_count` pieces, exchanges them "
              "within each replica group, and concatenates along `concat_dimension`.",
         looks="`\"stablehlo.all_to_all\"(%arg1) <{concat_dimension = 1 : i64, split_count = 8 : "
               "i64, split_dimension = 1 : i64, replica_groups = ...}>`.",
         misread="When the split and concat dimensions are equal the shape does not change at all, "
                 "yet every element may have moved to another device."),
    Card("stablehlo.reduce_scatter", "stablehlo", "collective", pairs=("reduce_scatter",),
         what="Reduces tensors across the devices of each replica group with its region's combiner "
              "and leaves each device one slice along `scatter_dimension`.",
         looks="`\"stablehlo.reduce_scatter\"(%arg1) <{scatter_dimension = 0 : i64, ...}> ({ ... "
               "stablehlo.add ... }) : (tensor<8x8xf32>) -> tensor<1x8xf32>`.",
         misread="A result smaller than the input by the group size is the point, not a failed "
                 "all_reduce: it is the cheaper first half of one."),
    Card("stablehlo.partition_id", "stablehlo", "collective", pairs=("axis_index",),
         what="Returns the id of the partition (the device, in SPMD) running the code, as a ui32 "
              "scalar.",
         looks="`%1 = stablehlo.partition_id : tensor<ui32>`, followed by a divide and a remainder "
               "by constants.",
         misread="It is not the mesh coordinate itself: the divide and remainder after it turn the "
                 "flat id into the axis_index you asked for."),
    Card("sdy.manual_computation", "stablehlo", "sharding", pairs=("shard_map",),
         what="A Shardy region whose body runs per device on local shards over `manual_axes`; it "
              "is what shard_map lowers to.",
         looks="`sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{\"x\"}, {}]>, ...] "
               "out_shardings=[...] manual_axes={\"x\"} (%arg2: tensor<8x32xf32>, ...) { ... }`.",
         misread="The region's block arguments have local shapes (`tensor<8x32xf32>`) while its "
                 "operands have global ones (`tensor<64x32xf32>`); the difference is the sharding, "
                 "not a reshape."),
    Card("sdy.sharding_constraint", "stablehlo", "sharding", pairs=("reshard", "sharding_constraint"),
         what="Pins the sharding of a value at one point in the program for the Shardy "
              "partitioner.",
         looks="`%0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {}]> : tensor<8x4xf32>`: one `{}` "
               "per dimension, empty meaning replicated and `{\"x\"}` meaning split over x.",
         misread="It computes nothing and is not itself a collective, but the partitioner may "
                 "insert communication to satisfy it, which is where an unexpected all-gather "
                 "comes from."),
)
