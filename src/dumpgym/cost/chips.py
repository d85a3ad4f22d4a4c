"""The chips a roofline time is taken on: each one's published peaks, keyed by the device kind XLA records.

A layer whose device kind is not here (the CPU's, which records none) gets costs without a roofline time.
Adding a chip is one `register_chip(device_kind, Chip(...))` line, with where its figures are published.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chip:
    """A chip's published peaks: dense bf16 matmul FLOP/s, HBM bytes/s and the bytes/s one chip sends to the others
    over its interconnect (a TPU's ICI, an H100's NVLink), and where each figure is published; and, where an f32 dot
    runs at a rate of its own at JAX's default precision (an H100's TF32), that rate."""

    name: str
    flops_per_s: float
    hbm_bytes_per_s: float
    source: str
    interconnect_bytes_per_s: float | None = None  # None: collectives get no time (their bytes sent still count)
    interconnect_source: str = ""
    f32_flops_per_s: float | None = None  # None: an f32 dot runs at the bf16 peak (a TPU's MXU at default precision)
    f32_source: str = ""

    @property
    def ridge(self) -> float:
        """FLOPs per HBM byte at which compute and memory take equally long: above it, compute-bound."""
        return self.flops_per_s / self.hbm_bytes_per_s

    @property
    def f32_ridge(self) -> float:
        """The ridge point of an f32 dot: its own rate (TF32 on an H100) over the HBM bandwidth."""
        return (self.f32_flops_per_s or self.flops_per_s) / self.hbm_bytes_per_s


# Keyed by the device kind the compiled layer records (`CompiledLayer.device_kind`).
CHIPS: dict[str, Chip] = {}


def register_chip(device_kind: str, chip: Chip) -> Chip:
    """Name the peaks of the chips XLA calls `device_kind`; refused if it is named already."""
    if device_kind in CHIPS:
        raise ValueError(f"chip {device_kind!r} is registered twice")
    CHIPS[device_kind] = chip
    return chip


register_chip("TPU v5 lite", Chip(
    "TPU v5e", 197e12, 819e9, "Google Cloud, TPU v5e page: 197 TFLOP/s bf16, 819 GB/s HBM2",
    # 400 GB/s counts both directions of all 4 ICI ports together: a chip sends at half of it
    200e9, "Google Cloud, TPU v5e page: bidirectional inter-chip interconnect (ICI) bandwidth 400 GB/s per chip, "
           "4 ICI ports (200 GB/s each way)"))
register_chip("NVIDIA H100 80GB HBM3", Chip(
    "H100 SXM", 989e12, 3.35e12, "NVIDIA H100 datasheet, SXM: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3",
    # 900 GB/s counts both directions: a GPU sends at half of it
    450e9, "NVIDIA H100 datasheet, SXM: NVLink 900 GB/s (both directions together; 450 GB/s each way)",
    # f32 dots run on the tensor cores as TF32 at JAX's default precision; the datasheet's 989 TF32 figure is with
    # sparsity, the dense rate half of it
    494.7e12, "NVIDIA H100 datasheet, SXM: TF32 Tensor Core 989 TFLOP/s with sparsity, 494.7 TFLOP/s dense"))
