"""Unions over the walks of a graph without cycles, each node's made once from its neighbours': what a walk from
every node of a computation would find, in time linear in the graph (a walk from each node is quadratic)."""
from __future__ import annotations


def closure(step, passes, own):
    """`reach(line, start=False)`: the union, as bits, of `own(k)` over every `k` a walk from `line` visits, going
    on to `step(k)` from the lines that `passes` (and from `line` itself when `start`); each line's union is made
    once, from its neighbours' (a dataflow graph has no cycle; a line met again on its own walk adds nothing)."""
    memo: dict[int, int] = {}

    def reach(line: int, start: bool = False) -> int:
        if not start or passes(line):
            return _walked(line)
        out = own(line)
        for k in step(line):
            out |= _walked(k)
        return out

    def _walked(line: int) -> int:
        path, todo = set(), [(line, False)]  # depth first, each line's union made after its neighbours'
        while todo:
            k, after = todo.pop()
            if k in memo:
                continue
            if after:
                value = own(k)
                if passes(k):
                    for n in step(k):
                        value |= memo.get(n, 0)  # not there: `k`'s own walk came back to it
                memo[k] = value
                path.discard(k)
            elif k not in path:
                path.add(k)
                todo.append((k, True))
                if passes(k):
                    todo += [(n, False) for n in step(k) if n not in memo]
        return memo[line]

    return reach


def bits(value: int):
    """The numbers of the bits set in `value`, lowest first."""
    while value:
        low = value & -value
        yield low.bit_length() - 1
        value ^= low
