"""The unions over walks that pair compiled rows (`cost/closure.py`): what a walk from each node finds, made in
steps linear in the graph, counted as the graph doubles (no clock)."""
from dumpgym.cost.closure import bits, closure


def _ladder(n: int) -> dict[int, tuple[int, ...]]:
    """A dataflow graph of `n` values, each reading the two before it (a walk from the last reaches every
    value by exponentially many paths): value -> the values it reads."""
    return {k: tuple(j for j in (k - 1, k - 2) if j >= 0) for k in range(n)}


def _walk(graph, line, passes, start):
    """Every value a plain walk from `line` visits, going on from those that pass (and from `line` when `start`)."""
    seen, todo = set(), [line]
    while todo:
        k = todo.pop()
        if k not in seen:
            seen.add(k)
            if (start and k == line) or passes(k):
                todo += graph[k]
    return seen


def _steps(n: int) -> tuple[int, dict, dict]:
    """How many times the walks asked a value for its neighbours, reaching from every value of a ladder of `n`
    and stopping at each pair 5k, 5k + 1; what they found (bits of the values divisible by 7); what plain walks
    find."""
    graph, asked = _ladder(n), [0]

    def step(k):
        asked[0] += 1
        return graph[k]

    def passes(k):
        return k % 5 not in (0, 1)

    reach = closure(step, passes, lambda k: 1 << k if k % 7 == 0 else 0)
    found = {k: set(bits(reach(k, start=True))) for k in graph}
    plain = {k: {j for j in _walk(graph, k, passes, True) if j % 7 == 0} for k in graph}
    return asked[0], found, plain


def test_each_value_reaches_what_a_plain_walk_from_it_finds():
    _, found, plain = _steps(200)
    assert found == plain
    assert found[199] == {196} and found[191] == {189}  # stops: 191 and 190; 191 goes on as the start


def test_the_walks_from_every_value_take_steps_linear_in_the_graph():
    small, _, _ = _steps(500)
    large, _, _ = _steps(1000)
    assert small <= 4 * 500  # each value asked a bounded number of times, not once per value it feeds
    assert large <= 2 * small + 8


def test_bits_names_each_set_bit_lowest_first():
    assert list(bits(0)) == []
    assert list(bits(0b1010_0001)) == [0, 5, 7]
    assert list(bits(1 << 300 | 1 << 2)) == [2, 300]
