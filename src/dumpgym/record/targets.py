"""What XLA compiles a program for (a `Target`), and the registry of compiled layers (`TARGETS`).

A `Target` says how to compile: this machine's CPU, or a named TPU or GPU without one. A
`CompileTarget` is one compiled layer the gym knows by id (`cpu`, `tpu`, `gpu`): how the page labels
and names it, what it needs installed, and the `Target` it compiles for. The record keeps a
program's layers as `compiled: {id: layer}`, and every stage after it iterates over what a program
has, so one more built-in layer is one `register_target` call here and a corpus rebuild.

libtpu (the `tpu` extra: `pip install dumpgym[tpu]`) describes any TPU slice by name
(`jax.experimental.topologies.get_topology_desc`) and compiles for its devices on a machine with
none, so the TPU layer depends only on the topology and the libtpu version, never on the host.
JAX's CUDA plugin (the `gpu` extra) does the same for a GPU described by a `GpuTargetConfigProto`
(`data/gpu/NAME.txtpb`): XLA's GPU compiler runs without a GPU or a driver, but cannot time
candidate kernels, so each GEMM keeps XLA's default configuration (docs/xray.md, "A GPU target").
Programs on one device compile for the topology's first chip (as `jax.jit` does with a TPU as the
default device); programs with a mesh get the same mesh, same axes, over the topology's chips.
"""
from __future__ import annotations

import glob
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from dumpgym.errors import GymError
from dumpgym.record.schema import valid_target_id

# The generations libtpu 0.0.42 names and compiles for; each gives different compiled text
# (checked: tests/test_target.py). `v7x` is refused by this libtpu; a topology's size changes
# nothing for a program on one device.
GENERATIONS = {"v4": "TPU v4", "v5e": "TPU v5 lite", "v5p": "TPU v5", "v6e": "TPU v6 lite"}
# The default TPU target for a program on up to four devices, and the next sizes for larger
# meshes (v5e slices are 2-D: 2x2 = 4 chips, 2x4 = 8, 4x4 = 16, ...).
DEFAULT_TOPOLOGY = "v5e:2x2"
_V5E_BY_SIZE = ((4, "v5e:2x2"), (8, "v5e:2x4"), (16, "v5e:4x4"), (32, "v5e:4x8"), (64, "v5e:8x8"),
                (128, "v5e:8x16"), (256, "v5e:16x16"))


# The GPUs `gpu:NAME` names, each described by data/gpu/NAME.txtpb (XLA's spec of that model, cut to
# the fields jax-cuda12-plugin 0.10.2 parses), and the device kind the plugin then reports.
GPUS = {"h100": "NVIDIA H100 80GB HBM3", "a100": "NVIDIA A100-SXM4-80GB"}
DEFAULT_GPU = "h100"
GPU_SPECS = Path(__file__).parents[1] / "data" / "gpu"
# The package that compiles for a GPU, and the one that ships the `ptxas` XLA runs as it compiles.
CUDA_PLUGIN = "jax-cuda12-plugin"


class TargetError(GymError):
    """A compile target that cannot be used here: an unknown name, or its compiler is missing."""


@dataclass(frozen=True)
class Target:
    """A compile target: `cpu` (this host), `tpu` with a topology name (`v5e:2x2`; None: sized to the
    program), or `gpu` with a GPU's name (`h100`)."""

    platform: str
    topology: str | None = None

    def installed(self) -> bool:
        """Whether this target's compiler is installed here (the CPU's always is)."""
        return {"tpu": libtpu_installed, "gpu": cuda_plugin_installed}.get(self.platform, lambda: True)()

    def require(self) -> None:
        """Raise `TargetError` in one line, naming the pip extra, unless this target's compiler is installed."""
        if self.platform == "tpu":
            require_libtpu()
        elif self.platform == "gpu":
            require_cuda_plugin()

    def topology_for(self, devices: int) -> str:
        """The topology to compile a program on `devices` devices for: a TPU slice, or `NAME:1x1xN` GPUs."""
        if self.platform == "gpu":
            return f"{self.topology or DEFAULT_GPU}:1x1x{devices}"
        if self.topology is not None:
            return self.topology
        for size, name in _V5E_BY_SIZE:
            if devices <= size:
                return name
        raise TargetError(f"no v5e topology holds {devices} devices; name one with --hlo tpu:GEN:SHAPE")


CPU = Target("cpu")
TPU = Target("tpu")
GPU = Target("gpu", DEFAULT_GPU)

# Ids that name a program's other listings: a compiled layer may not take them.
_LISTING_NAMES = frozenset({"source", "jaxpr", "stablehlo"})


@dataclass(frozen=True)
class CompileTarget:
    """One compiled layer the gym knows: its id in the record (`compiled[id]`), its label on the page's
    switch, how the page names it in full, and the `Target` it compiles for.

    `builtin`: whether `dumpgym corpus build` compiles the built-in programs for it. A program that
    lowers for one platform alone (a Pallas TPU kernel, `Program.platform`) gets only the layers of
    that platform.
    """

    id: str
    label: str
    name: str
    target: Target
    builtin: bool = True

    @property
    def platform(self) -> str:
        """The platform XLA compiles for: `cpu`, `tpu` or `gpu`."""
        return self.target.platform

    def to_json(self) -> dict:
        """What the page is told of this target (its listings are named by `id`)."""
        return {"id": self.id, "label": self.label, "name": self.name, "platform": self.platform}


# In the page's order: the switch lists them so, and a program's first layer here is the one shown first.
TARGETS: dict[str, CompileTarget] = {}


def register_target(entry: CompileTarget) -> CompileTarget:
    """Add a compiled layer to the registry (after the ones there); refused if its id is taken or not an id."""
    if not valid_target_id(entry.id) or entry.id in _LISTING_NAMES:
        raise ValueError(f"compile target id {entry.id!r}: lowercase letters, digits and dashes, not a listing's name")
    if entry.id in TARGETS:
        raise ValueError(f"compile target {entry.id!r} is registered twice")
    TARGETS[entry.id] = entry
    return entry


register_target(CompileTarget("tpu", "TPU", "TPU v5e, compiled without a TPU", TPU))
register_target(CompileTarget("gpu", "GPU", "NVIDIA H100, compiled without a GPU", GPU))
register_target(CompileTarget("cpu", "CPU", "this machine's CPU", CPU))


def target_id(target: Target) -> str:
    """The registry id a compile for `target` is kept under: the entry with this very target, else
    the platform's first entry (`add --hlo tpu:v6e:2x4` is the program's TPU layer)."""
    for entry in TARGETS.values():
        if entry.target == target:
            return entry.id
    for entry in TARGETS.values():
        if entry.platform == target.platform:
            return entry.id
    raise TargetError(f"no compile target is registered for {target.platform}")


def builtin_targets(platform: str = "cpu") -> list[CompileTarget]:
    """The layers `corpus build` compiles a built-in program for: every built-in entry, or for a program
    that lowers for one platform alone (`Program.platform` other than cpu), that platform's."""
    return [t for t in TARGETS.values() if t.builtin and (platform == "cpu" or t.platform == platform)]


def parse_target(text: str) -> Target:
    """`cpu`, `tpu` (v5e 2x2, or the v5e slice a mesh needs), `tpu:GEN:SHAPE` (`tpu:v6e:2x4`),
    `gpu` (an H100) or `gpu:NAME` (`gpu:a100`), or the id of a registered target."""
    if text in TARGETS:
        return TARGETS[text].target
    platform, _, topology = text.partition(":")
    if platform == "cpu" and not topology:
        return CPU
    if platform == "tpu":
        if not topology:
            return TPU
        generation, _, shape = topology.partition(":")
        if generation in GENERATIONS and shape and all(p.isdigit() for p in shape.split("x")):
            return Target("tpu", topology)
    if platform == "gpu" and (not topology or topology in GPUS):
        return Target("gpu", topology or DEFAULT_GPU)
    names = ", ".join(f"tpu:{g}:2x2" if g in ("v5e", "v6e") else f"tpu:{g}:2x2x1" for g in GENERATIONS)
    gpus = ", ".join(f"gpu:{g}" for g in GPUS)
    raise TargetError(f"unknown compile target {text!r}: use cpu, tpu, a TPU topology ({names}), gpu or {gpus}")


def libtpu_installed() -> bool:
    """Whether the TPU compiler (the `libtpu` package) is installed, without loading it."""
    return importlib.util.find_spec("libtpu") is not None


def require_libtpu() -> None:
    """Raise `TargetError` in one line unless libtpu is installed."""
    _require(libtpu_installed(), "tpu", "jax[tpu], with libtpu; no TPU needed")


def cuda_plugin_installed() -> bool:
    """Whether the GPU compiler (JAX's CUDA plugin) is installed, without loading it."""
    return importlib.util.find_spec("jax_cuda12_plugin") is not None


def require_cuda_plugin() -> None:
    """Raise `TargetError` in one line unless JAX's CUDA plugin is installed."""
    _require(cuda_plugin_installed(), "gpu", "JAX's CUDA 12 plugin and ptxas; no GPU needed")


def _require(installed: bool, extra: str, brings: str) -> None:
    """Raise `TargetError` in one line unless the compiler of the `extra` layer (`tpu`, `gpu`) is
    `installed`: it names the pip extra that installs it, and what that `brings`."""
    if not installed:
        layer = extra.upper()
        raise TargetError(f"the {layer} layer needs the {layer} compiler: pip install 'dumpgym[{extra}]' ({brings})")


def gpu_spec(name: str) -> str:
    """The `GpuTargetConfigProto` text that describes the GPU `name` (`h100`) to XLA."""
    return (GPU_SPECS / f"{name}.txtpb").read_text(encoding="utf-8")


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


def _nvidia_driver_loaded() -> bool:
    """Whether this machine runs NVIDIA's kernel driver (which a GPU needs; the driver makes this file)."""
    return os.path.exists("/proc/driver/nvidia/version")


def quiet_libtpu() -> None:
    """On a machine without TPU chips, tell libtpu so up front: loading it then prints nothing, and
    several processes may load it at once; likewise JAX's CUDA plugin on a machine without a GPU.

    Without these, libtpu asks the cloud metadata server what slice it runs on, gets a warning
    back instead of an answer, and logs errors to stderr (each CLI command would show them); and
    it takes /tmp/libtpu_lockfile, so a second process compiling for a TPU (a test beside a build)
    fails. With no chip there is nothing to guard. The CUDA plugin's start-up check calls the
    driver, fails, prints a traceback and leaves the plugin out, so it could describe no GPU;
    skipping the check registers it quietly (JAX still runs on the CPU). None of them changes
    compiled text: a topology is named explicitly. Variables already set win. Call before JAX
    first starts its backends.
    """
    if cuda_plugin_installed() and not _nvidia_driver_loaded():
        os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    if not libtpu_installed() or _tpu_attached():
        return
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
