"""Compiled HLO recounted by the tests' own code from XLA's parse of the text (the HLO bindings and each
instruction's printed form), not from the record's facts: what a row computes, to check `compare`'s pairing."""
import re
from collections import Counter


class Parsed:
    """A compiled text as XLA's HLO bindings read it: each instruction by name with its printed opcode, its
    result's (element type, dims) per array, its operands' names and the computations it calls or applies."""

    def __init__(self, text: str):
        from jaxlib import xla_client

        self.members, self.op, self.value, self.operands, self.called, self.param = {}, {}, {}, {}, {}, {}
        for c in xla_client.hlo.hlo_module_from_text(text).computations():
            self.members[c.name] = [i.name for i in c.instructions()]
            for i in c.instructions():
                printed = i.to_string()
                found = re.match(r"(?:ROOT )?%\S+ = (.*?) ([a-z][a-z0-9\-]*)\(", printed)
                self.op[i.name] = found[2]
                self.value[i.name] = self._arrays(xla_client.Shape(re.sub(r"/\*.*?\*/", "", found[1])))
                self.operands[i.name] = [o.name for o in i.operands()]
                self.called[i.name] = re.findall(r"\b(?:calls|to_apply)=%([\w.\-]+)", printed)
                number = re.match(r"(?:ROOT )?%\S+ = .*? parameter\((\d+)\)", printed)
                self.param[i.name] = int(number[1]) if number else None

    def _arrays(self, shape) -> tuple:
        if shape.is_tuple():
            return tuple(a for s in shape.tuple_shapes() for a in self._arrays(s))
        return ((str(shape.element_type()), tuple(shape.dimensions())),)

    def dims(self, name: str) -> tuple:
        """The dims of the arrays `name` returns, element types left out."""
        return tuple(dims for _, dims in self.value[name])

    def inside(self, name: str) -> list[str]:
        """Every instruction of the computations `name` calls or applies, nested ones too."""
        out, todo, seen = [], list(self.called[name]), set()
        while todo:
            c = todo.pop()
            if c not in seen:
                seen.add(c)
                out += self.members[c]
                todo += [k for i in self.members[c] for k in self.called[i]]
        return out

    def body(self, name: str, ids: dict) -> Counter:
        """The bodies `name` runs as a multiset of dataflow trees (opcode, element types and dims, parameter
        number, the operands' trees), each tree interned in `ids`, which two texts share to compare."""
        memo = {}

        def tree(i: str) -> int:
            if i not in memo:
                key = (self.op[i], self.value[i], self.param[i], tuple(tree(o) for o in self.operands[i]),
                       tuple(tuple(sorted(Counter(tree(k) for k in self.members[c]).items())) for c in self.called[i]))
                memo[i] = ids.setdefault(key, len(ids))
            return memo[i]
        return Counter(tree(i) for c in self.called[name] for i in self.members[c])

    def ops(self, name: str) -> Counter:
        """The instructions `name` runs inside, each as (printed opcode, result dims, operands' dims)."""
        return Counter((self.op[i], self.dims(i), tuple(self.dims(o) for o in self.operands[i]))
                       for i in self.inside(name))


def jaccard(a: Counter, b: Counter) -> float:
    """What two multisets share over what either holds (1 when both are empty)."""
    union = sum((a | b).values())
    return sum((a & b).values()) / union if union else 1.0


def computes(parsed: Parsed, name: str) -> set[str]:
    """The opcodes of what `name` runs inside, less those that only name or pass on a value."""
    return {parsed.op[i] for i in parsed.inside(name)} - {"parameter", "constant", "get-tuple-element", "tuple",
                                                           "bitcast"}
