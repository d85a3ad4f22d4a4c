"""The lowered module's facts (`LoweredModule`): what MLIR reads in the StableHLO, once, so that no later stage parses it again.

`build_xray` (traced/xray.py) calls `read_lowered` on the plain lowering it has parsed with MLIR:
main's signature (`function_type`, each argument's `tf.aliasing_output` and `sdy.sharding`, each
result's `sdy.sharding`), every `sdy.mesh`, every `sdy.sharding_constraint` and every op with
`replica_groups`, each with its printed line. Shardy's attributes are read through its own bindings
(`jaxlib.mlir.dialects.sdy`). `op_facts` reads what the record keeps on each op's own row
(`StablehloOp`): a `func.call`'s callee, a `stablehlo.dot_general`'s dimension numbers
(`stablehlo.DotDimensionNumbers`) with its operands' and result's names and types, and a transpose's, reduce's
or concatenate's operands, results and the attribute that decides its result's shape.
"""
from __future__ import annotations

from dumpgym.record.schema import (LoweredModule, MainSignature, MainValue, SdyMesh, ShardingConstraint, StablehloCollective,
                                   StablehloDot, StablehloValue)


def read_lowered(module) -> LoweredModule:
    """Main's signature, the meshes, sharding constraints and collectives of a parsed StableHLO module."""
    import numpy as np
    from jaxlib.mlir import ir

    from dumpgym.jax_internals import location_line

    mains: list[MainSignature] = []
    meshes, constraints, collectives = [], [], []

    def visit(op):
        name = op.name
        if name == "sdy.mesh":
            meshes.append(SdyMesh(location_line(op.location), _mesh(op)))
        elif name == "func.func" and op.attributes["sym_name"].value == "main" and not mains:
            mains.append(_signature(op, location_line(op.location)))
        elif name == "sdy.sharding_constraint":
            type_ = op.results[0].type
            constraints.append(ShardingConstraint(location_line(op.location), str(type_), _shape(type_),
                                                  _axes(op.attributes["sharding"])))
        elif "replica_groups" in op.attributes:
            groups = np.array(ir.DenseIntElementsAttr(op.attributes["replica_groups"])).tolist()
            collectives.append(StablehloCollective(name, location_line(op.location), tuple(map(tuple, groups))))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return LoweredModule(mains[0] if mains else None, tuple(meshes), tuple(constraints), tuple(collectives))


def _mesh(op) -> tuple[tuple[str, int], ...]:
    from jaxlib.mlir.dialects import sdy

    return tuple((sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size)
                 for a in sdy.MeshAttr(op.attributes["mesh"]).axes)


def _axes(attr) -> tuple[tuple[str, ...], ...] | None:
    """Mesh axis names per array axis of an `sdy.sharding`; None where a sub-axis is used."""
    from jaxlib.mlir.dialects import sdy

    out = []
    for dim in sdy.TensorShardingAttr(attr).dimension_shardings:
        refs = [sdy.AxisRefAttr(a) for a in sdy.DimensionShardingAttr(dim).axes]
        if any(r.sub_axis_info is not None for r in refs):
            return None
        out.append(tuple(r.name for r in refs))
    return tuple(out)


def _shape(type_) -> tuple[int, ...] | None:
    from jaxlib.mlir import ir

    try:
        return tuple(ir.RankedTensorType(type_).shape)
    except ValueError:  # not a ranked tensor (a token): no shape
        return None


def _signature(op, line: int) -> MainSignature:
    """Main's arguments and results: types, shapes, shardings, and the result each donated argument lends to."""
    from jaxlib.mlir import ir

    kinds = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    values = {}
    for key, types in (("arg_attrs", kinds.inputs), ("res_attrs", kinds.results)):
        attrs = [ir.DictAttr(a) for a in ir.ArrayAttr(op.attributes[key])] if key in op.attributes else []
        values[key] = tuple(_value(t, attrs[i] if i < len(attrs) else None) for i, t in enumerate(types))
    return MainSignature(line, values["arg_attrs"], values["res_attrs"])


def _value(type_, attrs) -> MainValue:
    from jaxlib.mlir import ir

    sharding = _axes(attrs["sdy.sharding"]) if attrs is not None and "sdy.sharding" in attrs else None
    alias = ir.IntegerAttr(attrs["tf.aliasing_output"]).value if attrs is not None and "tf.aliasing_output" in attrs \
        else None
    return MainValue(str(type_), _shape(type_), sharding, alias)


def op_facts(op, names) -> dict:
    """What the record keeps of one op beside its name and line (`StablehloOp`'s `dot` and `callee`), as
    keyword arguments: a dot_general's dimension numbers, operands and result, a `func.call`'s callee.
    `names` is an `AsmState` of the module, which names each value as the module prints it."""
    from jaxlib.mlir import ir

    name = op.name
    if name == "func.call" and "callee" in op.attributes:
        return {"callee": ir.FlatSymbolRefAttr(op.attributes["callee"]).value}
    if name == "stablehlo.dot_general" and len(op.operands) == 2 and len(op.results) == 1:
        from jaxlib.mlir.dialects import stablehlo

        values = [_tensor_value(v, names) for v in (*op.operands, op.results[0])]
        if None in values:
            return {}
        d = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
        return {"dot": StablehloDot(tuple(d.lhs_batching_dimensions), tuple(d.lhs_contracting_dimensions),
                                    tuple(d.rhs_batching_dimensions), tuple(d.rhs_contracting_dimensions), *values)}
    return {}


def dumped_op_facts(op, names) -> dict:
    """`op_facts`, and for a dump's module (which may have no jaxpr to ask of) a transpose's, reduce's or
    concatenate's values and deciding attribute (`shape_facts`). A traced program's record keeps them once
    the committed corpus is made again with them."""
    return op_facts(op, names) or (shape_facts(op, names) if op.name in _SHAPED else {})


# The ops whose result shape one attribute decides, and that attribute's name.
_SHAPED = {"stablehlo.transpose": "permutation", "stablehlo.reduce": "dimensions",
           "stablehlo.concatenate": "dimension", "stablehlo.slice": "start_indices"}


def shape_facts(op, names) -> dict:
    """A transpose's, reduce's, concatenate's or slice's operands, results, deciding attribute (a slice's bounds) and
    (a reduce's) combiner, as `StablehloOp` keyword arguments; nothing where a value is no static tensor or a
    reduce's body is not one op."""
    from jaxlib.mlir import ir

    operands = [_tensor_value(v, names) for v in op.operands]
    results = [_tensor_value(v, names) for v in op.results]
    attribute = op.attributes[_SHAPED[op.name]] if _SHAPED[op.name] in op.attributes else None
    if None in operands or None in results or attribute is None:
        return {}
    bounds: tuple = ()
    if op.name == "stablehlo.concatenate":
        dimensions = (ir.IntegerAttr(attribute).value,)
    elif op.name == "stablehlo.slice":
        dimensions = ()
        bounds = tuple(zip(*(tuple(ir.DenseI64ArrayAttr(op.attributes[k]))
                             for k in ("start_indices", "limit_indices", "strides"))))
    else:
        dimensions = tuple(ir.DenseI64ArrayAttr(attribute))
    combiner = ""
    if op.name == "stablehlo.reduce":
        body = [o.operation.name for o in op.regions[0].blocks[0].operations]
        if len(body) != 2 or body[1] != "stablehlo.return":
            return {}
        combiner = body[0]
    return {"operands": tuple(operands), "results": tuple(results), "dimensions": dimensions, "combiner": combiner,
            "slice": bounds}


def _tensor_value(value, names) -> StablehloValue | None:
    """A value of a static ranked tensor type without an encoding, or None (what an aval cannot hold)."""
    from jaxlib.mlir import ir

    try:
        type_ = ir.RankedTensorType(value.type)
    except ValueError:  # not a ranked tensor
        return None
    if not type_.has_static_shape or type_.encoding is not None:
        return None
    return StablehloValue(value.get_name(names), str(value.type), tuple(type_.shape), str(type_.element_type))


def asm_names(module):
    """The names MLIR prints each value of `module` with, worked out once for the whole module."""
    from jaxlib.mlir import ir

    return ir.AsmState(module.operation)
