"""The shape oracle at StableHLO, for a dump without a jaxpr (JAX's default `JAX_DUMP_IR_TO`): what comes out of one op?

Such a record has no equations, so the oracle reads the ops whose output needs inference from what their own
line prints: a `stablehlo.transpose` (its `dims` permutation), a one-line `stablehlo.reduce` (its
`across dimensions`) and a `stablehlo.concatenate` (its `dim`). The page shows the op's line with its result
type masked; the operand types stand in the line's signature. An op is asked only where its result type prints
nowhere else on the line, and its dtype is an array's (a float or a signed integer, which the aval spelling
names). Each misreading is computed from the op's own attribute and operands, never invented; every item has
one line of `feedback`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from dumpgym.drills._dot import MASK
from dumpgym.drills._layers import text_lines
from dumpgym.record.dtypes import long as long_dtype
from dumpgym.record.schema import Aval, ProgramRecord

# The signature that ends a generic op line: `: (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>`.
_SIGNATURE = re.compile(r":\s*\((?P<operands>[^()]*)\)\s*->\s*(?P<result>tensor<[^<>]*>)\s*$")
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z]+\d+)>")
_DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64")
_TRANSPOSE = re.compile(r"= stablehlo\.transpose %[\w.#]+, dims = \[([\d, ]*)\] :")
_REDUCE = re.compile(r"= stablehlo\.reduce\(%[\w.#]+ init: %[\w.#]+\) applies stablehlo\.(\w+) "
                     r"across dimensions = \[([\d, ]*)\] :")
_CONCATENATE = re.compile(r"= stablehlo\.concatenate (?:%[\w.#]+, )+dim = (\d+) :")
OPS = {"stablehlo.transpose": "transpose", "stablehlo.reduce": "reduction", "stablehlo.concatenate": "concat"}


@dataclass(frozen=True)
class OpShape:
    """One op's shape question: its line, the masked line, the answer aval, the misreadings and why."""

    line: int
    op: str
    skill: str
    shown: str
    operands: tuple[Aval, ...]
    answer: Aval
    misread: dict[str, tuple[str, str]]  # aval text -> (rule, reason)
    feedback: str


def _aval(tensor: str) -> Aval | None:
    """`tensor<4x8xf32>` as the aval `f32[4,8]`; None for a dtype the aval spelling does not name."""
    m = _TENSOR.fullmatch(tensor.strip())
    if m is None or m[2] not in _DTYPES:
        return None
    return Aval(tuple(int(d) for d in m[1].split("x") if d), long_dtype(m[2]))


def _axes(text: str) -> tuple[int, ...]:
    return tuple(int(a) for a in text.split(",") if a.strip())


def op_shapes(program: ProgramRecord) -> list[OpShape]:
    """The shape questions of a record's StableHLO ops (see the module's doc), in line order."""
    lines = text_lines(program.stablehlo)
    out = []
    for op in program.stablehlo_ops:
        if op.name not in OPS or not 0 < op.line <= len(lines):
            continue
        text = lines[op.line - 1].rstrip()
        signature = _SIGNATURE.search(text)
        if signature is None:
            continue
        operands = [_aval(t[0]) for t in _TENSOR.finditer(signature["operands"])]
        answer = _aval(signature["result"])
        if answer is None or None in operands or not operands:
            continue
        masked = text[:signature.start("result")].rstrip() + " " + MASK
        if signature["result"] in masked or any(answer.same(a) for a in operands):
            continue  # the answer is printed beside it
        made = _question(op.name, text, operands, answer)
        if made is None:
            continue
        wrong, why = made
        misread = {}
        for aval, rule, reason in wrong:
            if not aval.same(answer) and str(aval) not in misread and all(d > 0 for d in aval.shape):
                misread[str(aval)] = (rule, reason)
        if misread:
            out.append(OpShape(op.line, op.name, OPS[op.name], masked.strip(), tuple(operands), answer, misread, why))
    return out


def _question(name: str, text: str, operands: list[Aval], answer: Aval):
    """(misreadings, feedback) of one op, or None where its line is not the form read here or the attribute
    does not give the printed result (then it is not asked)."""
    if name == "stablehlo.transpose":
        m = _TRANSPOSE.search(text)
        if m is None or len(operands) != 1:
            return None
        (x,), perm = operands, _axes(m[1])
        if sorted(perm) != list(range(x.rank)) or answer.shape != tuple(x.shape[p] for p in perm):
            return None
        inverse = tuple(perm.index(k) for k in range(x.rank))
        wrong = [(x, "ignored-permutation", "kept the operand's shape; transpose moves operand axis dims[i] to place i"),
                 (x.with_shape(tuple(x.shape[p] for p in inverse)), "inverse-permutation",
                  "read dims as where each operand axis goes; dims[i] is the operand axis that becomes axis i"),
                 (x.with_shape(tuple(reversed(x.shape))), "reversed-all",
                  "reversed every axis, as `.T` does; dims names the order")]
        return wrong, f"dims = {list(perm)}: result axis i is operand axis dims[i], so {x} becomes {answer}"
    if name == "stablehlo.reduce":
        m = _REDUCE.search(text)
        if m is None or len(operands) != 2 or operands[1].rank != 0:
            return None
        x, axes = operands[0], _axes(m[2])
        kept = tuple(d for k, d in enumerate(x.shape) if k not in axes)
        if answer.shape != kept or not axes or any(a >= x.rank for a in axes):
            return None
        wrong = [(x.with_shape(tuple(1 if k in axes else d for k, d in enumerate(x.shape))), "kept-dims",
                  "kept the reduced axes as size 1, as keepdims=True would; a reduce drops them"),
                 (x.with_shape(tuple(d for k, d in enumerate(x.shape) if k in axes)), "reduced-the-kept-axes",
                  f"took dimensions = {list(axes)} for the axes kept; they are the axes combined away"),
                 (x.with_shape(()), "reduced-everything", "reduced every axis to a scalar; only the listed ones go"),
                 (x, "kept-shape", f"kept the operand's shape; the {m[1]} combines each listed axis away")]
        return wrong, (f"across dimensions = {list(axes)}: those axes of {x} are combined away by {m[1]}, "
                       f"the rest kept in order: {answer}")
    m = _CONCATENATE.search(text)
    if m is None or len(operands) < 2:
        return None
    dim, first = int(m[1]), operands[0]
    if dim >= first.rank or any(a.rank != first.rank for a in operands):
        return None
    joined = tuple(sum(a.shape[k] for a in operands) if k == dim else d for k, d in enumerate(first.shape))
    if answer.shape != joined:
        return None
    wrong = [(first.with_shape((len(operands), *first.shape)), "stacked",
              "stacked the operands on a new leading axis, as jnp.stack does; concatenate joins along an existing one")]
    for other in range(first.rank):
        if other != dim and all(a.shape[k] == first.shape[k] for a in operands for k in range(first.rank) if k != other):
            wrong.append((first.with_shape(tuple(sum(a.shape[k] for a in operands) if k == other else d
                                                 for k, d in enumerate(first.shape))), "wrong-axis",
                          f"joined along axis {other}; dim = {dim} names the axis"))
    wrong.append((first, "first-operand", "took the first operand's shape; the operands' sizes along dim add up"))
    return wrong, f"dim = {dim}: the operands' sizes along axis {dim} add up, the other axes stay: {answer}"
