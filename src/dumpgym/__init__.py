"""dumpgym: drills for reading JAX compiler dumps on sight."""
import os as _os

# Sharded programs run on eight simulated CPU devices; XLA reads this flag once,
# when the backend first initialises, so it must be in place before that.
_FLAG = "--xla_force_host_platform_device_count=8"
if "xla_force_host_platform_device_count" not in _os.environ.get("XLA_FLAGS", ""):
    _os.environ["XLA_FLAGS"] = (_os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

# With the TPU extra installed on a machine without TPU chips, libtpu must be told so before JAX
# starts its backends, or it logs errors on every command and locks out a second process.
from dumpgym.record.targets import quiet_libtpu as _quiet_libtpu  # noqa: E402

_quiet_libtpu()

__version__ = "0.1.0"



def xray(function, *example_args, compiled: bool | str = False, **example_kwargs):
    """Trace `function` on example arguments and return a notebook-ready x-ray (`compiled`: with XLA's HLO,
    True for this host's CPU or a target as `add` takes it).

    The arguments are what `add` takes: arrays, `jax.ShapeDtypeStruct`s, aval strings, pytrees and
    models; leaves that are not arrays are static.
    """
    from dumpgym.notebook import xray as _xray

    return _xray(function, *example_args, compiled=compiled, **example_kwargs)


def add(function, *example_args, slug: str | None = None, title: str | None = None, corpus=None,
        compiled: bool | str = False, **example_kwargs):
    """Put `function`, traced on example arguments (as `xray` takes them), into your gym; returns its record.

    `compiled`: True or "cpu" adds this host's compiled HLO; "tpu" or "tpu:GEN:SHAPE" a TPU's, compiled
    without a TPU (needs dumpgym[tpu]); "gpu" or "gpu:a100" an H100's or A100's, compiled without a GPU
    (needs dumpgym[gpu]).

    The same path as `dumpgym add` on the command line: the same checks, and locked, atomic writes
    to the corpus folder (`corpus`, else the user data directory).
    """
    from dumpgym.corpus.add import add_function, entry_of

    name = getattr(function, "__name__", type(function).__name__)
    return add_function(function, example_args, example_kwargs, entry=entry_of(function), name=name, slug=slug,
                        title=title, corpus_dir=corpus, compiled=compiled)
