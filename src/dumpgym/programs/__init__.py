"""The built-in corpus: seventeen programs, one module each, in the order the gym shows them."""
import importlib

SLUGS = (
    "mlp", "layernorm", "rmsnorm", "softmax", "logsumexp", "attention", "causal", "mha",
    "gqa", "rope", "scan", "remat", "moe", "grads", "dequant", "sharded", "psum",
)


def builtin_programs():
    """Every built-in `Program`, imported on demand (the sharded ones need eight devices)."""
    return [importlib.import_module(f"dumpgym.programs.{slug}").PROGRAM for slug in SLUGS]
