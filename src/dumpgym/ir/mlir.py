"""jaxlib's MLIR bindings as the traced stages use them: JAX's context, a module's ops in print order, and
the tree of functions and regions they sit in."""
from __future__ import annotations

import functools


@functools.cache
def jax_context():
    """An MLIR context with the dialects JAX registers, made once (parsing JAX's lowerings needs them)."""
    from jax.interpreters import mlir

    return mlir.make_ir_context()


class OpTree:
    """A module's operations in print order, as parallel lists: each op, its name, the function it
    sits in, and the index of the op holding the region it sits in (None: a function body)."""

    def __init__(self, module):
        self.module = module  # the ops are views into it: it must outlive them
        self.ops: list = []
        self.names: list[str] = []
        self.functions: list[str | None] = []
        self.holders: list[int | None] = []
        self._visit(module.operation, None, None)

    def _visit(self, op, function, holder):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    name = child.name
                    index = len(self.ops)
                    self.ops.append(child)
                    self.names.append(name)
                    self.holders.append(holder)
                    if name == "func.func":
                        inner_function = child.attributes["sym_name"].value
                        self.functions.append(inner_function)
                        self._visit(child, inner_function, holder)
                    else:
                        self.functions.append(function)
                        self._visit(child, function, index)


def ops_in_order(module) -> list:
    """Every operation inside `module`, in print order (a pre-order walk)."""
    from jaxlib.mlir import ir

    ops: list = []

    def visit(op):
        ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ops[1:]  # the walk starts at the module itself


def parse_lowered(text: str):
    """A StableHLO text JAX printed, parsed in JAX's context: each op located at its printed line."""
    from jaxlib.mlir import ir

    return ir.Module.parse(text, context=jax_context())
