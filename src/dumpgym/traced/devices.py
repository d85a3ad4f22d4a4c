"""The devices a program is traced and compiled for on a TPU or GPU target without one, and what the record says of them.

libtpu describes a named TPU topology, and JAX's CUDA plugin a GPU from its `GpuTargetConfigProto`
(`record.targets.gpu_spec`); a program's mesh and shardings are moved onto those devices before
XLA compiles it (`retarget`).
"""
from __future__ import annotations

import functools
import hashlib

from dumpgym.record.targets import (CUDA_PLUGIN, GPUS, TargetError, gpu_spec, quiet_libtpu, require_cuda_plugin,
                                    require_libtpu)


def _installed_version(distribution: str) -> str:
    """The installed version of a compiler package (`libtpu`, `CUDA_PLUGIN`), as pip reports it."""
    from importlib.metadata import version

    return version(distribution)


@functools.cache
def topology_devices(topology: str) -> tuple:
    """The devices of a named TPU topology (`v5e:2x2`, from libtpu) or of N GPUs (`h100:1x1xN`, from
    the CUDA plugin); cached: one description per name."""
    if topology.partition(":")[0] in GPUS:
        return _gpu_devices(topology)
    require_libtpu()
    quiet_libtpu()
    from jax.experimental import topologies

    try:
        return tuple(topologies.get_topology_desc(platform="tpu", topology_name=topology).devices)
    except Exception as error:  # libtpu refuses names it does not know (JaxRuntimeError)
        raise TargetError(f"libtpu cannot describe topology {topology!r}: {str(error).splitlines()[0]}") from None


def _gpu_devices(topology: str) -> tuple:
    """N devices of the GPU `topology` names (`h100:1x1xN`), described by its spec to the CUDA plugin."""
    require_cuda_plugin()
    quiet_libtpu()
    from jax.experimental import topologies

    name, _, shape = topology.partition(":")
    try:
        return tuple(topologies.get_topology_desc(platform="cuda", topology_name="", target_config=gpu_spec(name),
                                                  topology=shape).devices)
    except Exception as error:  # the plugin was left out (JAX started before dumpgym), or refused the spec
        first = (str(error).strip().splitlines() or [""])[0]
        if "not implemented" in first:
            raise TargetError(f"JAX's CUDA plugin did not start, so it cannot describe {topology!r}: import dumpgym "
                              "before JAX starts, or set JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1") from None
        raise TargetError(f"the CUDA plugin cannot describe GPU topology {topology!r}: {first}") from None


def compiled_for(topology: str, device) -> dict:
    """What the record says a layer compiled for `topology` without its chips was compiled for
    (`CompiledLayer` fields): the host is none, and `host_id` digests all the text depends on."""
    import jaxlib

    kind = device.device_kind
    if topology.partition(":")[0] in GPUS:
        version = _installed_version(CUDA_PLUGIN)
        what = ("gpu", gpu_spec(topology.partition(":")[0]), topology, version, jaxlib.__version__)
        return {"backend": "gpu", "host": "", "host_id": _digest(what), "device_kind": kind, "topology": topology,
                "cuda_plugin_version": version}
    version = _installed_version("libtpu")
    what = ("tpu", kind, topology, version, jaxlib.__version__)
    return {"backend": "tpu", "host": "", "host_id": _digest(what), "device_kind": kind, "topology": topology,
            "libtpu_version": version}


def _digest(parts) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def retarget(value, devices: tuple, memo: dict):
    """`value` (a mesh, a sharding, or a tuple of them) moved onto `devices`; anything else unchanged.

    A mesh keeps its axis names, sizes and types over the first devices in `jax.make_mesh`'s order,
    which is how a TPU user would build it; the same mesh maps to the same mesh.
    """
    import jax
    from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding

    if type(value) is tuple:  # not a NamedTuple param (a gather's or scatter's dimension numbers): kept whole
        return tuple(retarget(v, devices, memo) for v in value)
    if isinstance(value, Mesh):
        if value.size == 0 or not value.axis_names:
            return value
        if id(value) not in memo:
            if value.size > len(devices):
                raise TargetError(f"the program's mesh has {value.size} devices; the topology has {len(devices)}")
            memo[id(value)] = (value, jax.make_mesh(tuple(value.axis_sizes), tuple(value.axis_names),
                                                    axis_types=tuple(value.axis_types),
                                                    devices=list(devices[:value.size])))
        return memo[id(value)][1]
    if isinstance(value, NamedSharding) and isinstance(value.mesh, Mesh):
        return NamedSharding(retarget(value.mesh, devices, memo), value.spec, memory_kind=value.memory_kind)
    if isinstance(value, SingleDeviceSharding):
        return SingleDeviceSharding(devices[0], memory_kind=value.memory_kind)
    return value
