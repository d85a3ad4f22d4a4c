"""The built-in corpus, one module per program, in the order the gym shows them.

The seventeen of the seed come first (small, straight-line, mostly on one device); the second part
is what real training and inference code prints: loops, branches, a training step, sharding by jit,
backpropagation through a loop, fully sharded gradients and a Pallas kernel.
"""
import importlib

SLUGS = (
    "mlp", "layernorm", "rmsnorm", "softmax", "logsumexp", "attention", "causal", "mha",
    "gqa", "rope", "scan", "remat", "moe", "grads", "dequant", "sharded", "psum",
    "scan-layers", "decode-loop", "cond-switch", "train-step", "ckpt-policy", "auto-sharded",
    "embed-xent", "dropout", "sdpa", "rnn-bptt", "fsdp-step", "pallas-matmul",
)

# Programs only a TPU can lower (`Program.platform == "tpu"`): no CPU compiled layer.
TPU_ONLY = ("pallas-matmul",)


def builtin_programs():
    """Every built-in `Program`, imported on demand (the sharded ones need eight devices)."""
    return [builtin_program(slug) for slug in SLUGS]


def builtin_program(slug: str):
    """The built-in `Program` named `slug`."""
    return importlib.import_module(f"dumpgym.programs.{module_name(slug)}").PROGRAM


def module_name(slug: str) -> str:
    """The module of a built-in program: its slug with `-` as `_` (`scan-layers` is `scan_layers`)."""
    return slug.replace("-", "_")
