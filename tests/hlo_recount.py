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


# Attributes that say where an instruction came from or how a backend tunes it, not what it computes: XLA's
# canonical print (`HloPrintOptions.canonical()`) leaves them out too.
_NOT_COMPUTED = ("metadata", "backend_config", "frontend_attributes", "statistics", "origin", "control-predecessors",
                 "channel_id")
_CALLING = ("calls", "to_apply", "condition", "body", "branch_computations", "called_computations",
            "async_execution_thread")


def _split(text: str, sep: str = ",") -> list[str]:
    """`text` cut at each top-level `sep` (outside brackets, braces, parentheses and quotes)."""
    out, depth, quoted, start = [], 0, False, 0
    for k, ch in enumerate(text):
        if ch == '"' and (k == 0 or text[k - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth -= 1
        elif not quoted and depth == 0 and ch == sep:
            out.append(text[start:k])
            start = k + 1
    out.append(text[start:])
    return [piece.strip() for piece in out if piece.strip()]


def _printed(printed: str) -> tuple[str, str, str, list[str]]:
    """An instruction as XLA prints it, cut into its result shape, opcode, what its parentheses hold and its
    attributes (`key=value`), each as printed."""
    found = re.match(r"(?:ROOT )?%\S+ = (.*?) ([a-z][a-z0-9\-]*)\(", printed)
    depth, quoted, k = 1, False, found.end()
    while depth:
        ch = printed[k]
        if ch == '"' and printed[k - 1] != "\\":
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth -= 1
        k += 1
    return found[1], found[2], printed[found.end():k - 1], _split(printed[k:].lstrip(", "))


class Canonical:
    """What an instruction computes, by a definition of the tests' own over XLA's parse of the text, names
    ignored: its printed opcode, result shape (layout included), the attributes that say what it computes
    (all but metadata and backend configuration, a called computation's name replaced by what that
    computation computes), and its operands: for a row, each operand's shape; inside a called computation,
    each operand's own canonical form, a parameter by its number, a constant by its value. Two instructions
    compute the same when their forms are equal (`same`); `ids` is shared by the texts compared."""

    def __init__(self, text: str, ids: dict):
        from jaxlib import xla_client

        self.ids, self.instructions, self.roots = ids, {}, {}
        module = xla_client.hlo.hlo_module_from_text(text)
        for c in module.computations():
            for i in c.instructions():
                self.instructions[i.name] = (i.to_string(), [o.name for o in i.operands()])
        computation = None
        for line in module.to_string().splitlines():  # each computation's root, as XLA prints the module
            header = re.match(r"(?:ENTRY )?%([\w.\-]+) ", line)
            if header and line.rstrip().endswith("{"):
                computation = header[1]
            root = re.match(r"\s*ROOT %([\w.\-]+) = ", line)
            if root:
                self.roots[computation] = root[1]
        self.memo: dict[str, int] = {}

    def _attributes(self, attributes: list[str]) -> tuple:
        out = []
        for attribute in attributes:
            key, _, value = attribute.partition("=")
            if key in _NOT_COMPUTED:
                continue
            if key in _CALLING:
                value = tuple(self.node(self.roots[n]) for n in re.findall(r"%([\w.\-]+)", value))
            out.append((key, value))
        return tuple(out)

    def node(self, name: str) -> int:
        """The canonical form of an instruction inside a called computation, interned."""
        if name not in self.memo:
            printed, operands = self.instructions[name]
            shape, opcode, inside, attributes = _printed(printed)
            held = inside if not operands else tuple(self.node(o) for o in operands)
            self.memo[name] = self.ids.setdefault((opcode, shape, held, self._attributes(attributes)), len(self.ids))
        return self.memo[name]

    def row(self, name: str) -> int:
        """The canonical form of a row: as `node`, but its operands known by their shapes alone."""
        printed, operands = self.instructions[name]
        shape, opcode, inside, attributes = _printed(printed)
        held = inside if not operands else tuple(_printed(self.instructions[o][0])[0] for o in operands)
        return self.ids.setdefault(("row", opcode, shape, held, self._attributes(attributes)), len(self.ids))
