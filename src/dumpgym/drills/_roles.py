"""Where a loop's operands sit, read right and under each misreading: the `role` step of the loops drill.

A scan's operands are its consts, then the initial carries, then the xs (`num_consts`, `num_carry`); a
while's are the condition's consts, the body's consts, then the loop state (`cond_nconsts`,
`body_nconsts`). Each misreading places the operands another way; `pick_wrong` keeps, for every wrong
role, the first misreading that gives it.
"""
from __future__ import annotations

from dumpgym.record.schema import EqnFact


def scan_layout(c: int, k: int, n: int, order=("const", "carry", "xs")) -> list[str]:
    """The role of each of `n` operands when `c` consts, `k` carries and the xs come in `order`."""
    counts = {"const": c, "carry": k}
    out = [role for role in order if role != "xs" for _ in range(counts[role])]
    return (out + ["xs"] * n)[:n]


def while_layout(cc: int, bc: int, n: int) -> list[str]:
    """The role of each of `n` while operands: `cc` condition consts, `bc` body consts, then the carries."""
    return (["cond-const"] * cc + ["body-const"] * bc + ["carry"] * n)[:n]


def scan_misreadings(eqn: EqnFact, i: int) -> list[tuple]:
    """(role, rule, reason) for each way of misplacing operand `i` of a scan, most telling first."""
    c, k, n, length = eqn.params["num_consts"], eqn.params["num_carry"], len(eqn.inputs), eqn.params["length"]
    counts = f"num_consts={c}, num_carry={k}"
    found = [
        (scan_layout(c, k, n, ("carry", "const", "xs"))[i], "carries-first",
         f"counted the carries before the consts; the operands run consts, carries, xs ({counts})"),
        (scan_layout(k, c, n)[i], "counts-swapped",
         f"swapped the counts: took num_consts={c} as the carries' number and num_carry={k} as the consts'"),
        (scan_layout(0, k, n)[i], "forgot-consts",
         f"ignored num_consts={c}: took {leading(k)} for the carries and the rest for xs"),
    ]
    shape = eqn.input_avals[i].shape
    if shape and shape[0] == length:
        found.append(("xs", "leading-axis-is-length",
                      f"took it for an xs because its leading axis is {length}, the scan's length; "
                      f"only the operands after the {c} consts and {k} carries are sliced"))
    return found + _role_fallbacks(SCAN_FALLBACKS, c, k, length)


SCAN_FALLBACKS = {
    ("const", "carry"): ("const-as-carry", "took it for loop state; {first_c} them: passed whole to every "
                         "iteration and never returned"),
    ("const", "xs"): ("const-as-xs", "assumed scan slices every array operand; {first_c} them, passed whole"),
    ("carry", "const"): ("carry-as-const", "took the initial carry for a const; num_consts={c} ends before it, and "
                         "each iteration's result replaces it"),
    ("carry", "xs"): ("carry-as-xs", "took the initial carry for an xs; the carries, {carry_ops}, are never "
                      "sliced"),
    ("xs", "const"): ("stacked-as-const", "took the stacked array for a const read whole; it comes after {c_k}, "
                      "so each iteration gets one of its {length} slices along axis 0"),
    ("xs", "carry"): ("xs-as-carry", "took it for loop state; the carries are {carry_ops}, and this one comes after "
                      "them: it is sliced, one slice per iteration"),
}


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 const`, `3 consts`, `4 carries`."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def operand_range(start: int, n: int) -> str:
    """`n` operands from index `start`: `operand 3`, `operands 1 to 4`, `no operand`."""
    return "no operand" if n == 0 else f"operand {start}" if n == 1 else f"operands {start} to {start + n - 1}"


def leading(n: int) -> str:
    """The first `n` operands, by index: `operand 0`, `operands 0 to 2`, `no operand`."""
    return operand_range(0, n)


def _role_fallbacks(table: dict, *values) -> list[tuple]:
    """The plain role confusions of a table as (role, rule, reason, right role), each for its right role only."""
    c, k, length = values
    words = {"c": c, "length": length, "carry_ops": operand_range(c, k),
             "first_c": f"the consts are {leading(c)}, and it is one of",
             "c_k": f"{plural(c, 'const')} and {plural(k, 'carry', 'carries')}"}
    return [(wrong, rule, reason.format(**words), right)
            for (right, wrong), (rule, reason) in table.items()]


def while_misreadings(eqn: EqnFact, i: int) -> list[tuple]:
    """(role, rule, reason) for each way of misplacing operand `i` of a while, most telling first."""
    cc, bc, n = eqn.params["cond_nconsts"], eqn.params["body_nconsts"], len(eqn.inputs)
    counts, consts = f"cond_nconsts={cc}, body_nconsts={bc}", leading(cc + bc)
    return [
        (while_layout(bc, cc, n)[i], "nconsts-swapped",
         f"swapped the counts: took body_nconsts={bc} for the condition's consts ({counts})"),
        ((["body-const"] * bc + ["cond-const"] * cc + ["carry"] * n)[i], "body-consts-first",
         f"put the body's consts first; the condition's {cc} come before the body's {bc}"),
        ("carry", "forgot-consts",
         f"took every operand for loop state, as while_loop(cond, body, init) spells only init; "
         f"the consts the two functions close over come first: {leading(cc + bc)}"),
        ("body-const", "carry-as-body-const", f"took it for a const of the body; the consts are {consts}, "
                                              "and this one is loop state, updated by every run", "carry"),
        ("cond-const", "carry-as-cond-const", f"took it for a const of the condition; the consts are {consts}, "
                                              "and this one is loop state, updated by every run", "carry"),
    ]


def pick_wrong(right: str, found: list[tuple], labels: dict[str, str]) -> list[tuple[str, str, str]]:
    """One (label, rule, reason) per wrong role, from the first misreading that gives it."""
    out: dict[str, tuple[str, str, str]] = {}
    for role, rule, reason, *only in found:
        if role != right and role not in out and (not only or only[0] == right):
            out[role] = (labels[role], rule, reason)
    return list(out.values())


# ---------------------------------------------------------------------------------------------
# The items.
