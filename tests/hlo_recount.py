"""Compiled HLO recounted by the tests' own code from XLA's parse of the text (the HLO bindings and each
instruction's printed form), not from the record's facts: what a row computes, to check `compare`'s pairing."""
import re
from collections import Counter
from operator import eq


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


def roots(module) -> dict[str, str]:
    """Each computation's root instruction by the computation's name, as XLA prints the parsed module."""
    out, computation = {}, None
    for line in module.to_string().splitlines():  # each computation's root, as XLA prints the module
        header = re.match(r"(?:ENTRY )?%([\w.\-]+) ", line)
        if header and line.rstrip().endswith("{"):
            computation = header[1]
        root = re.match(r"\s*ROOT %([\w.\-]+) = ", line)
        if root:
            out[computation] = root[1]
    return out


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

        self.ids, self.instructions = ids, {}
        module = xla_client.hlo.hlo_module_from_text(text)
        for c in module.computations():
            for i in c.instructions():
                self.instructions[i.name] = (i.to_string(), [o.name for o in i.operands()])
        self.roots = roots(module)
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


class Surroundings:
    """Where a row sits and what it does, by a definition of the tests' own over XLA's parse of a compiled text,
    independent of how `compare` ranks partners: the entry arguments its operands are computed from (each
    computation's parameters, by number and tuple index, reached back through operands), the results it
    feeds (its computation's root, by tuple index, reached forward through users), its users' opcodes, its
    fused body as a dataflow graph (Weisfeiler-Lehman labels over opcode and dims, three rounds), and its
    result dims. `near` compares two rows of two texts aspect by aspect; `labels` is shared by the texts
    compared."""

    ROUNDS = 3

    def __init__(self, text: str, labels: dict):
        from jaxlib import xla_client

        self.parsed = Parsed(text)
        self.computation, self.users, self.index, self.printed = {}, {}, {}, {}
        module = xla_client.hlo.hlo_module_from_text(text)
        for c in module.computations():
            for i in c.instructions():
                self.computation[i.name] = c.name
                self.printed[i.name] = i.to_string()
                self.users[i.name] = [u.name for u in i.users()]
                found = re.search(r"\bindex=(\d+)", i.to_string())
                self.index[i.name] = int(found[1]) if found else None
        self.labels, self.root = labels, roots(module)

    def sources(self, name: str) -> frozenset:
        """The parameters of its computation that `name`'s value is computed from: (number, tuple index)."""
        p = self.parsed
        out, todo, seen = set(), list(p.operands[name]), set()
        if p.param[name] is not None:
            return frozenset({(p.param[name], None)})
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            if p.param[i] is not None:
                out.add((p.param[i], None))
            elif p.op[i] == "get-tuple-element" and p.param.get(p.operands[i][0]) is not None:
                out.add((p.param[p.operands[i][0]], self.index[i]))
            else:
                todo += p.operands[i]
        return frozenset(out)

    def sinks(self, name: str) -> frozenset:
        """The results of its computation that `name`'s value flows into: the root's tuple indices it reaches
        (None for a root that is no tuple)."""
        root = self.root[self.computation[name]]
        reached, todo = set(), [name]
        while todo:
            i = todo.pop()
            if i not in reached:
                reached.add(i)
                todo += self.users[i]
        if root not in reached:
            return frozenset()
        if self.parsed.op[root] != "tuple":
            return frozenset({None})
        return frozenset(k for k, o in enumerate(self.parsed.operands[root]) if o in reached)

    def body(self, name: str) -> Counter:
        """The Weisfeiler-Lehman labels of the computations `name` runs, every round's, as a multiset."""
        p = self.parsed
        inside = p.inside(name)
        label = {i: (p.op[i], p.dims(i), p.param[i]) for i in inside}
        out = Counter(label.values())
        for _ in range(self.ROUNDS):
            label = {i: (label[i], tuple(label.get(o) for o in p.operands[i])) for i in inside}
            label = {i: self.labels.setdefault(v, len(self.labels)) for i, v in label.items()}
            out.update(("round", v) for v in label.values())
        return out

    def around(self, name: str, step) -> Counter:
        """`name`'s Weisfeiler-Lehman labels over its computation's dataflow, one a round, walking `step` (its
        operands or its users): each round a row's label and those of its neighbours, by printed opcode and
        the opcodes its body computes with, dims left out."""
        p, memo = self.parsed, {}

        def label(i: str, depth: int):
            if (i, depth) not in memo:
                own = (p.op[i], tuple(sorted({p.op[k] for k in p.inside(i)})))
                memo[i, depth] = own if not depth else self.labels.setdefault(
                    (own, tuple(label(o, depth - 1) for o in step(i))), len(self.labels))
            return memo[i, depth]
        return Counter(("round", depth, label(name, depth)) for depth in range(1, self.ROUNDS + 1))

    def said(self, name: str) -> tuple:
        """What `name`'s own line says beyond its shape and operands: what its parentheses hold when it names no
        operand (a constant's value), and its attributes that say what it computes (a slice's bounds)."""
        _, _, inside, attributes = _printed(self.printed[name])
        return (inside if not self.parsed.operands[name] else "",
                tuple(a for a in attributes if a.partition("=")[0] not in _NOT_COMPUTED + _CALLING))

    def facts(self, name: str) -> tuple:
        return (self.sources(name), self.sinks(name), self.body(name),
                Counter(self.parsed.op[u] for u in self.users[name]), (self.parsed.dims(name), self.said(name)),
                self.around(name, lambda i: self.parsed.operands[i]), self.around(name, lambda i: self.users[i]))


def near(a: tuple, b: tuple) -> tuple:
    """How alike two rows' `Surroundings.facts` are, aspect by aspect: each set's or multiset's shared part over
    its whole, and 1 for the same result dims."""
    return (*(jaccard(Counter(x), Counter(y)) for x, y in zip(a[:4], b[:4])), *map(float, map(eq, a[4], b[4])),
            *(jaccard(x, y) for x, y in zip(a[5:], b[5:])))


def dominates(p: tuple, q: tuple) -> bool:
    """`p` is closer than `q` in no aspect less and in some aspect more."""
    return all(x >= y for x, y in zip(p, q)) and p != q
