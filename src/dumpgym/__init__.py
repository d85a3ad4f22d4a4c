"""dumpgym: drills for reading JAX compiler dumps on sight."""
import os as _os

# Sharded programs run on eight simulated CPU devices; XLA reads this flag once,
# when the backend first initialises, so it must be in place before that.
_FLAG = "--xla_force_host_platform_device_count=8"
if "xla_force_host_platform_device_count" not in _os.environ.get("XLA_FLAGS", ""):
    _os.environ["XLA_FLAGS"] = (_os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

__version__ = "0.1.0"



def xray(function, *example_args, compiled: bool = False):
    """Trace `function` on example arguments and return a notebook-ready x-ray (`compiled`: with XLA's HLO)."""
    from dumpgym.notebook import xray as _xray

    return _xray(function, *example_args, compiled=compiled)
