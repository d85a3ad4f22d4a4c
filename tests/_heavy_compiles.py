"""Compiles the heavy tests would otherwise make twice."""
from unittest import mock


def layer_and_its_compiles(traced, facts, target):
    """`compile_layer(traced, facts, target)` for a TPU or GPU target, and the tagged and plain compiles
    `_compile_for_topology(traced, target)` made for it: the very call a test would make again to judge the
    layer from a fresh compile (two more XLA compiles of the same program). Should `compile_layer` not
    make that call, for that trace and that target, the test's own call is made instead."""
    from dumpgym import hlo

    compile_for_topology = hlo._compile_for_topology
    made = []

    def recorded(trace, to):
        compiled = compile_for_topology(trace, to)
        made.append((trace, to, compiled))
        return compiled

    with mock.patch.object(hlo, "_compile_for_topology", recorded):
        layer = hlo.compile_layer(traced, facts, target)
    for trace, to, compiled in made:
        if trace is traced and to == target:
            return layer, _done(compiled)
    return layer, _done(compile_for_topology(traced, target))


def _done(compiles):
    """`_compile_for_topology`'s (tagged, plain, about), its two compiles (set going by the call) waited for."""
    tagged, plain, about = compiles
    return tagged.result(), plain.result(), about
