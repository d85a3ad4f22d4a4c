"""The decoder's two choice questions about one operand axis, and how one dot's axis items share its weight.

An operand axis plays one of three roles (contracted, batch, free) and lands at one output axis or
nowhere. Asked as a tapped set, "which axes are free" has one of two answers on a rank-2 operand
(`[0]` for `x @ w`, `[1]` for `x.T @ g`), so the habit answers it; asked of one axis at a time, with
the three roles (or the output's axes and "summed away") as the options, every axis of a dot is a
question, and the dot's weight is shared so that each right option weighs the same within the dot:
a reader who picks the usual role or the axis's own index is right no more often than the options
allow.
"""
from __future__ import annotations

from dumpgym.drills._dot import DotDims
from dumpgym.drills.answer import Choice

ROLES = ("contracted", "batch", "free")
SUMMED = "summed away"
# The misreadings a wrong role names: (right role, picked role) -> rule.
ROLE_RULES = {("contracted", "free"): "contracted-for-free", ("contracted", "batch"): "contracted-for-batch",
              ("batch", "free"): "batch-for-free", ("batch", "contracted"): "batch-as-contracted",
              ("free", "contracted"): "free-as-contracted", ("free", "batch"): "free-as-batch"}


def role(d: DotDims, side: str, axis: int) -> str:
    """What one operand axis does: `contracted`, `batch` or `free`."""
    if axis in d.axes(side, "contracting"):
        return "contracted"
    return "batch" if axis in d.axes(side, "batch") else "free"


def _lists(d: DotDims, side: str) -> str:
    return f"contracting {list(d.axes(side, 'contracting'))}, batch {list(d.axes(side, 'batch'))}"


def roles(d: DotDims) -> tuple[str, ...]:
    """The roles an axis of this dot can play: the three, or, where the dot has no batch lists (its line
    says so), contracted and free: a batch option no axis can take would only pad the choice."""
    return ROLES if d.lhs_batch else tuple(r for r in ROLES if r != "batch")


def role_question(d: DotDims, side: str, axis: int) -> tuple[str, Choice, str]:
    """What does `side`'s `axis` do? One of the dot's roles (`roles`), always in the same order."""
    right = role(d, side, axis)
    size = d.operand(side).shape[axis]
    options = roles(d)
    reasons, rules = [], []
    for option in options:
        if option == right:
            reasons.append("")
            rules.append("")
            continue
        rules.append(ROLE_RULES[(right, option)])
        reasons.append(f"{side} axis {axis} is in neither list" if right == "free" else
                       f"{side} axis {axis} is in its {'contracting' if right == 'contracted' else 'batch'} list")
        reasons[-1] += f" ({_lists(d, side)}), so it is {right}, not {option}"
    why = f"{side}'s lists are {_lists(d, side)}: axis {axis} (size {size}) is {right}"
    question = f"In this dot, what part does {side} axis {axis} play?"
    return question, Choice(options, options.index(right), tuple(reasons), tuple(rules)), why


def place_options(d: DotDims, side: str | None = None) -> tuple[str, ...]:
    """The places an operand axis can go: each output axis, in order, then nowhere. Of one `side`'s axes:
    the output axes that hold a batch axis or one of that side's free axes, then nowhere; the other side's
    free axes are no option, as any reader who names the side would strike them, the options left even."""
    held = range(len(d.out_shape())) if side is None else sorted(
        {d.output_axis(side, a) for a in range(d.rank(side))} - {None} | set(range(len(d.lhs_batch))))
    return (*(f"output axis {j}" for j in held), SUMMED)


def _source(d: DotDims, j: int) -> str:
    """Which operand axes output axis `j` holds, in words."""
    n_batch, lhs_free = len(d.lhs_batch), d.free("lhs")
    if j < n_batch:
        return f"lhs axis {d.lhs_batch[j]} and rhs axis {d.rhs_batch[j]} (batch)"
    if j < n_batch + len(lhs_free):
        return f"lhs axis {lhs_free[j - n_batch]}"
    return f"rhs axis {d.free('rhs')[j - n_batch - len(lhs_free)]}"


def place_question(d: DotDims, side: str, axis: int) -> tuple[str, Choice, str]:
    """Where does `side`'s `axis` go in the output? An output axis, or summed away."""
    options = place_options(d, side)
    j = d.output_axis(side, axis)
    right = options.index(SUMMED if j is None else f"output axis {j}")
    n_batch, rank = len(d.lhs_batch), d.rank(side)
    reasons, rules = [], []
    for k, option in enumerate(options):
        if k == right:
            reasons.append("")
            rules.append("")
        elif option == SUMMED:
            rules.append("free-as-contracted" if role(d, side, axis) == "free" else "batch-as-contracted")
            reasons.append(f"{side} axis {axis} is {role(d, side, axis)}, not contracted: it lands at output axis {j}")
        elif j is None:
            rules.append("contracted-kept")
            reasons.append(f"{side} axis {axis} is contracted ({_lists(d, side)}): it is summed away and "
                           f"becomes no output axis")
        else:
            k = int(option.rsplit(" ", 1)[1])
            out_rank = len(d.out_shape())
            rule = ("kept-place" if k == axis and k < rank else "batch-forgotten" if n_batch and k == j - n_batch
                    else "other-end" if k == out_rank - 1 - j else "misplaced")
            rules.append(rule)
            reasons.append(f"output axis {k} holds {_source(d, k)}; {side} axis {axis} lands at output axis {j}")
    where = "is summed away" if j is None else f"lands at output axis {j}"
    why = (f"the output lists the batch axes ({n_batch}), then lhs's free axes {list(d.free('lhs'))}, then rhs's "
           f"{list(d.free('rhs'))}: {side} axis {axis} {where}")
    return f"Where does {side} axis {axis} end up in this dot's output?", \
        Choice(options, right, tuple(reasons), tuple(rules)), why


def habit(d: DotDims, side: str, axis: int, step: str) -> int:
    """The option a reader who does not read the dims picks for one axis: at the free steps the `x @ w`
    habit's role (lhs contracts its last axis, rhs its first, every other axis free), at `output-axis`
    the output axis of the asked axis's own index (`kept-place`) if it is an option, else summed away."""
    if step == "output-axis":
        options = place_options(d, side)
        return options.index(f"output axis {axis}") if f"output axis {axis}" in options else len(options) - 1
    usual = d.rank(side) - 1 if side == "lhs" else 0
    return roles(d).index("contracted" if axis == usual else "free")


def shares(answers: list[int], habits: list[int], rounds: int = 300) -> list[float]:
    """Each item's share of its dot's weight, adding up to 1: as even as can be over the right answers and
    the habit, so that no one option, nor the habit's pick (`habits[k]`), is right in much more of the
    dot's weight than another. Found by shrinking, round after round, the items of whichever option (or
    the habit) holds the most weight, from an even start; deterministic."""
    groups = [[k for k, a in enumerate(answers) if a == option] for option in sorted(set(answers))]
    groups.append([k for k, (a, h) in enumerate(zip(answers, habits)) if a == h])
    groups = [g for g in groups if g]
    members = [frozenset(g) for g in groups]
    out = [1 / len(answers)] * len(answers)
    for step in range(rounds):
        held = [sum(out[k] for k in g) for g in groups]
        worst = members[held.index(max(held))]  # the first of the heaviest, as max() picks
        rate = 0.5 / (step + 2)
        out = [w * (1 - rate) if k in worst else w for k, w in enumerate(out)]
        total = sum(out)
        out = [w / total for w in out]
    return out


def blind_picks(options: tuple[str, ...], axis: int, places: int, texts: tuple[str, ...]) -> list[int | None]:
    """What readers who do not read the dims pick at `output-axis`, asked of an operand's `axis`, one reader
    per entry whatever the item: each of `places` places (the last where there are fewer), the output axis
    of the axis's own number else summed away (the `kept-place` habit), the same number else the first
    output axis (a reader who matches the question's number, or guesses), and each of `texts` where it is
    an option (a reader of the usual answer; None where it is not)."""
    own = f"output axis {axis}"
    number = options.index(own) if own in options else None
    last = len(options) - 1
    return [*(min(p, last) for p in range(places)), last if number is None else number,
            0 if number is None else number, *(options.index(t) if t in options else None for t in texts)]


def even_over_program(answers: list[int], picks: list[list[int | None]], widths: list[int], weights: list[float],
                      groups: list, slack: float = 1.1, rounds: int = 300) -> list[float]:
    """The weights of one program's items of a step, moved between the items of each group (a dot at one
    layer: its total kept) so that no blind reader (`picks[k]`: what each picks on item k) is right in more than
    `slack` times the weight chance gives (1 / `widths[k]` per item) over the program. Within one dot the
    shares (`shares`) balance the options and the habit, but where the habit holds for nearly every axis
    (a batched `bij,bjk->bik`: its batch axis at output axis 0, its kept free axis at its own number) only
    the program's other dots tell what weighs too much. Shrinks, round after round, the items the reader
    most over chance gets right, each group then scaled back to its total; deterministic."""
    out = list(weights)
    totals: dict = {}
    for g, w in zip(groups, weights):
        totals[g] = totals.get(g, 0.0) + w
    readers = range(len(picks[0])) if picks else range(0)
    right = [[k for k in range(len(answers)) if picks[k][r] == answers[k]] for r in readers]
    for step in range(rounds):
        chance = sum(w / n for w, n in zip(out, widths))
        held = [sum(out[k] for k in group) for group in right]
        if not held or chance <= 0 or max(held) <= slack * chance:
            break
        worst = set(right[held.index(max(held))])
        rate = 0.5 / (step + 2)
        out = [w * (1 - rate) if k in worst else w for k, w in enumerate(out)]
        now: dict = {}
        for g, w in zip(groups, out):
            now[g] = now.get(g, 0.0) + w
        out = [w * totals[g] / now[g] if now[g] else w for g, w in zip(groups, out)]
    return out
