"""What XLA compiles a program for (a `Target`): this machine's CPU, or a named TPU topology without a TPU.

libtpu (the `tpu` extra: `pip install dumpgym[tpu]`) describes any TPU slice by name
(`jax.experimental.topologies.get_topology_desc`) and compiles for its devices on a machine with
none, so the TPU layer depends only on the topology and the libtpu version, never on the host.
Programs on one device compile for the topology's first chip (as `jax.jit` does with a TPU as the
default device); programs with a mesh get the same mesh, same axes, over the topology's chips.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
from dataclasses import dataclass

from dumpgym.errors import GymError

# The generations libtpu 0.0.42 names and compiles for; each gives different compiled text
# (checked: tests/test_target.py). `v7x` is refused by this libtpu; a topology's size changes
# nothing for a program on one device.
GENERATIONS = {"v4": "TPU v4", "v5e": "TPU v5 lite", "v5p": "TPU v5", "v6e": "TPU v6 lite"}
# The default TPU target for a program on up to four devices, and the next sizes for larger
# meshes (v5e slices are 2-D: 2x2 = 4 chips, 2x4 = 8, 4x4 = 16, ...).
DEFAULT_TOPOLOGY = "v5e:2x2"
_V5E_BY_SIZE = ((4, "v5e:2x2"), (8, "v5e:2x4"), (16, "v5e:4x4"), (32, "v5e:4x8"), (64, "v5e:8x8"),
                (128, "v5e:8x16"), (256, "v5e:16x16"))


class TargetError(GymError):
    """A compile target that cannot be used here: an unknown name, or the TPU compiler is missing."""


@dataclass(frozen=True)
class Target:
    """A compile target: `cpu` (this host), or `tpu` with a topology name (`v5e:2x2`; None: sized to the program)."""

    platform: str
    topology: str | None = None

    def topology_for(self, devices: int) -> str:
        """The topology to compile a program on `devices` devices for (TPU only)."""
        if self.topology is not None:
            return self.topology
        for size, name in _V5E_BY_SIZE:
            if devices <= size:
                return name
        raise TargetError(f"no v5e topology holds {devices} devices; name one with --hlo tpu:GEN:SHAPE")


CPU = Target("cpu")
TPU = Target("tpu")


def parse_target(text: str) -> Target:
    """`cpu`, `tpu` (v5e 2x2, or the v5e slice a mesh needs) or `tpu:GEN:SHAPE` (`tpu:v6e:2x4`)."""
    platform, _, topology = text.partition(":")
    if platform == "cpu" and not topology:
        return CPU
    if platform == "tpu":
        if not topology:
            return TPU
        generation, _, shape = topology.partition(":")
        if generation in GENERATIONS and shape and all(p.isdigit() for p in shape.split("x")):
            return Target("tpu", topology)
    names = ", ".join(f"tpu:{g}:2x2" if g in ("v5e", "v6e") else f"tpu:{g}:2x2x1" for g in GENERATIONS)
    raise TargetError(f"unknown compile target {text!r}: use cpu, tpu, or a TPU topology ({names})")


def libtpu_installed() -> bool:
    """Whether the TPU compiler (the `libtpu` package) is installed, without loading it."""
    return importlib.util.find_spec("libtpu") is not None


def require_libtpu() -> None:
    """Raise `TargetError` in one line unless libtpu is installed."""
    if not libtpu_installed():
        raise TargetError("the TPU layer needs the TPU compiler: pip install 'dumpgym[tpu]' "
                          "(jax[tpu], with libtpu; no TPU needed)")


def libtpu_version() -> str:
    """The installed libtpu's version, as pip reports it."""
    from importlib.metadata import version

    return version("libtpu")


def _tpu_attached() -> bool:
    """Whether this machine has TPU chips (Google's PCI vendor id, as JAX's own check reads it)."""
    for path in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(path) as f:
                if f.read().strip() == "0x1ae0":
                    return True
        except OSError:
            continue
    return False


def quiet_libtpu() -> None:
    """On a machine without TPU chips, tell libtpu so up front: loading it then prints nothing, and
    several processes may load it at once.

    Without these, libtpu asks the cloud metadata server what slice it runs on, gets a warning
    back instead of an answer, and logs errors to stderr (each CLI command would show them); and
    it takes /tmp/libtpu_lockfile, so a second process compiling for a TPU (a test beside a build)
    fails. With no chip there is nothing to guard. None of them changes compiled text: a topology
    is named explicitly. Variables already set win. Call before JAX first starts its backends.
    """
    if not libtpu_installed() or _tpu_attached():
        return
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")


@functools.cache
def topology_devices(topology: str) -> tuple:
    """The devices of a named TPU topology, from libtpu (cached: one description per name)."""
    require_libtpu()
    quiet_libtpu()
    from jax.experimental import topologies

    try:
        return tuple(topologies.get_topology_desc(platform="tpu", topology_name=topology).devices)
    except Exception as error:  # libtpu refuses names it does not know (JaxRuntimeError)
        raise TargetError(f"libtpu cannot describe topology {topology!r}: {str(error).splitlines()[0]}") from None


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
