"""GYM·07, loops: read a `scan`, `while` or `cond` equation's operands and params, and count a compiled while's runs.

Four questions (`step`), every scan, while and cond included, nested ones too:

- `role` (jaxpr): what is this operand to the loop? A scan's operands are its consts, then the
  initial carries, then the xs (`num_consts`, `num_carry`); a while's are the condition's consts,
  the body's consts, then the initial loop state (`cond_nconsts`, `body_nconsts`). A choice of the
  three roles, every time: each role shares its loop's weight equally, and the right one takes turns
  over the positions, so neither a usual role nor a usual place is right more than a third of the time.
- `body-aval` (jaxpr): what aval does one iteration of a scan's body see for an xs operand? The
  slice along axis 0, typed (`aval`). The body is never shown: its binders print the answer.
- `branch` (jaxpr): tap the branch a `cond` runs for a given predicate or index (a `line` of the
  cond's own text). The index is read off the equation that makes it: a bool converted to an int
  (lax.cond: the False branch is `branches[0]`) or a `clamp` into range (lax.switch); each value is
  its own item (both bools; below, inside and above a clamp's range). In a dump without a jaxpr, the same of
  each compiled `conditional`: tap the computation it runs for each index in range, or for each value of its
  predicate (`_branches.py`).
- `trips` (each TPU layer): at most how many times does the body of a compiled while run? Typed
  (`int`). Read from the TPU compile's recorded counters (`CompiledLayer.while_counters`, read
  through XLA's graph when it was compiled): the counter's start, step and the constant the
  condition compares it with. Every loop is asked "at most", so the words tell no early exit.

Every misreading is a wrong option's reason, a typed value's `misread` entry, or a wrong line's
`explain`; every item has one line of `feedback`.
"""
from __future__ import annotations

from collections import Counter as Tally

from dumpgym.drills import drill
from dumpgym.drills._avals import order
from dumpgym.drills._branches import compiled_branch_items
from dumpgym.drills._layers import text_lines
from dumpgym.drills._loops import Counter, counters, trip_misreadings
from dumpgym.drills._program_index import ProgramIndex
from dumpgym.drills._spread import answer_step, spread_weight
from dumpgym.drills._roles import (operand_range, pick_wrong, scan_layout, scan_misreadings, while_layout,
                                  while_misreadings)
from dumpgym.drills._tpu import Listing as HloListing, which_compile
from dumpgym.drills.answer import LinePick, Misreading, Typed
from dumpgym.drills.item import Item, from_draft, refer
from dumpgym.drills.shapes import Listing as JaxprListing
from dumpgym.record.schema import Aval, EqnFact, Literal, ProgramRecord

LOOPS = ("scan", "while")

# The three roles of a scan's (and of a while's) operands: a small closed category, asked as a choice with
# all three labels every time, of about the same length, each role about as often right (`_role_weights`).
SCAN_ROLES = {
    "const": "a const: read whole by every iteration",
    "carry": "a carry: replaced by each iteration's result",
    "xs": "an xs: sliced on its leading axis, a slice an iteration",
}
WHILE_ROLES = {
    "cond-const": "a const of cond_jaxpr: read by every test",
    "body-const": "a const of body_jaxpr: read by every run",
    "carry": "a carry: replaced by each run's result",
}


# ---------------------------------------------------------------------------------------------
# The equation as shown: its printed lines with every sub-jaxpr folded away.

def fold_bodies(lines: list[str], eqn: EqnFact) -> list[str]:
    """The equation's printed lines with each `{ lambda ... }` sub-jaxpr on them (`EqnFact.bodies`) written
    `{ … }`: its binders print the answers."""
    out = list(lines)
    for body in reversed(eqn.bodies):
        top, bottom = body.first - eqn.jaxpr_lines[0], body.last - eqn.jaxpr_lines[0]
        out[top:bottom + 1] = [out[top][:body.column] + "{ … }" + out[bottom][body.end:]]
    return out


def equation_text(program: ProgramRecord, eqn: EqnFact, fold: bool = True) -> str | None:
    """The equation's lines, dedented (bodies folded unless told); None when the record did not read its
    binders (it does not print `binders = primitive ...`)."""
    first, last = eqn.jaxpr_lines
    lines = text_lines(program.jaxpr)[first - 1:last]
    if not eqn.binders:
        return None
    indent = len(lines[0]) - len(lines[0].lstrip())
    return "\n".join(line[indent:] for line in (fold_bodies(lines, eqn) if fold else lines))


# ---------------------------------------------------------------------------------------------
# Roles: where each operand sits, read right and under each misreading (`_roles.py`).

def role_items(program: ProgramRecord, names: JaxprListing, eqn: EqnFact) -> list[dict]:
    """One `role` item per operand of a scan or while: const, carry or xs (or the while's three)."""
    text, operands = equation_text(program, eqn), names.operands(eqn)
    if text is None or operands is None:
        return []
    if eqn.primitive == "scan":
        p = eqn.params
        truth, labels = scan_layout(p["num_consts"], p["num_carry"], len(operands)), SCAN_ROLES
        misread = scan_misreadings
    else:
        truth = while_layout(eqn.params["cond_nconsts"], eqn.params["body_nconsts"], len(operands))
        labels, misread = WHILE_ROLES, while_misreadings
    shown = [text, names.operand_block(eqn, operands)]
    items = []
    for i, name in enumerate(operands):
        wrong = pick_wrong(truth[i], misread(eqn, i), labels)
        if len(wrong) < len(labels) - 1:
            continue
        items.append({**_jaxpr_item(eqn, "role", f"What is `{name}` (operand {i}) to this {eqn.primitive}?", shown,
                                    {}, operand=i),
                      "feedback": _role_feedback(eqn, truth, i), "role": truth[i],
                      "choice": (labels[truth[i]], wrong)})
    return _role_weights(_placed(items, program.slug, eqn.id))


def _placed(items: list[dict], *seed) -> list[dict]:
    """Each role item's options, the right one placed so that every position holds about the same share of
    the loop's weight (each role's share, `_role_weights`, split over its operands): heaviest items first,
    each to the position least right so far, one its role has not had yet where that ties (from an order
    drawn by `seed`)."""
    count = Tally(item["role"] for item in items)
    width = 1 + max((len(item["choice"][1]) for item in items), default=2)
    prefer, load, had = order(width, *seed), [0.0] * width, {role: set() for role in count}
    out = [dict(item) for item in items]
    for k in sorted(range(len(items)), key=lambda k: (-1 / count[items[k]["role"]], k)):
        item = items[k]
        right, wrong = item["choice"]
        at = min(range(len(wrong) + 1), key=lambda p: (round(load[p], 6), p in had[item["role"]], prefer.index(p)))
        load[at] += 1 / count[item["role"]]
        had[item["role"]].add(at)
        entries = [w for _, w in sorted(zip(order(len(wrong), *seed, item["operand"]), wrong))]
        entries.insert(at, (right, "", ""))
        made = {"options": [e[0] for e in entries], "answer": at, "reasons": [e[2] for e in entries],
                "rules": [e[1] for e in entries]}
        out[k] = {**{key: v for key, v in item.items() if key != "choice"}, **made}
    return out


def _role_feedback(eqn: EqnFact, truth: list[str], i: int) -> str:
    """Why operand `i` has its role: the counts the params give, and where the operand falls."""
    if eqn.primitive == "scan":
        c, k = eqn.params["num_consts"], eqn.params["num_carry"]
        counts, groups = f"num_consts={c}, num_carry={k}", (("consts", c), ("carries", k))
    else:
        c, k = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        counts, groups = f"cond_nconsts={c}, body_nconsts={k}", (("condition's consts", c), ("body's consts", k))
    at, parts = 0, []
    for what, n in groups:
        parts.append(f"{operand_range(at, n)} {'is' if n == 1 else 'are'} the {what}")
        at += n
    last = "xs" if eqn.primitive == "scan" else "carries"
    return f"{counts}: {', '.join(parts)}, the rest the {last}; operand {i} is a {truth[i]}"


def _role_weights(items: list[dict]) -> list[dict]:
    """Each role shares the loop's weight equally, however many operands have it: a loop with one const and
    eight xs would otherwise teach that the answer is usually xs."""
    count = Tally(item["role"] for item in items)
    return [{**item, "weight": round(1 / count[item["role"]], 3)} for item in items]


def sliced(aval: Aval) -> Aval:
    """What one iteration of a scan's body sees of an xs operand: the operand without its leading axis."""
    return aval.with_shape(aval.shape[1:])


def aval_misreadings(eqn: EqnFact, aval: Aval) -> list[tuple[str, str, str]]:
    """(aval, rule, reason) for the ways of misreading what the body sees of an xs operand."""
    length, unroll = eqn.params["length"], eqn.param("unroll")
    found = []
    if isinstance(unroll, int) and unroll > 1:  # the param a reader of this equation is most likely to misread
        found.append((aval.with_shape((unroll, *aval.shape[1:])), "unroll-as-chunk",
                      f"took unroll={unroll} for {unroll} slices per body; the body still sees one slice, "
                      "unrolling copies it when it is lowered"))
    found += [
        (aval, "kept-scanned-axis", f"kept the scanned axis; each iteration gets one of the {length} slices along "
                                    "axis 0, not the whole stack"),
        (aval.with_shape((1, *aval.shape[1:])), "kept-as-size-1",
         "kept the sliced axis as size 1, as xs[i:i+1] would; scan drops it, as xs[i] does"),
    ]
    if aval.rank >= 2:
        found.append((aval.with_shape(aval.shape[:-1]), "sliced-last-axis",
                      "sliced along the last axis; scan always slices axis 0"))
    return found


def body_aval_items(program: ProgramRecord, names: JaxprListing, eqn: EqnFact) -> list[dict]:
    """One `body-aval` item per xs operand of a scan: the aval its body's binder has."""
    text, operands = equation_text(program, eqn), names.operands(eqn)
    if eqn.primitive != "scan" or text is None or operands is None:
        return []
    first_xs = eqn.params["num_consts"] + eqn.params["num_carry"]
    shown = [text, names.operand_block(eqn, operands)]
    items = []
    for i in range(first_xs, len(operands)):
        aval = eqn.input_avals[i]
        answer = str(sliced(aval))
        wrong, seen = [], {answer}
        for option, rule, reason in aval_misreadings(eqn, aval):
            if str(option) not in seen and len(wrong) < 3:
                seen.add(str(option))
                wrong.append((str(option), rule, reason))
        if len(wrong) < 2:
            continue
        question = f"What aval does one iteration of the body see for the xs operand `{operands[i]}`? Type it."
        form = Typed("aval", answer, misread={str(a): Misreading(reason, rule) for a, rule, reason in wrong})
        why = (f"scan slices each xs along axis 0 into length={eqn.params['length']} slices: {aval} gives one "
               f"{answer} an iteration")
        items.append({**_jaxpr_item(eqn, "body-aval", question, shown, {}, operand=i), "form": form,
                      "feedback": why})
    return items


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def branch_text(k: int) -> str:
    """A branch as an option: `branches[1], the second listed`."""
    return f"branches[{k}], the {_ORDINALS[k]} listed" if k < len(_ORDINALS) else f"branches[{k}]"


def branch_question(index: ProgramIndex, eqn: EqnFact, seed: int) -> tuple | None:
    """(question, value, answer branch, wrong options) for a cond whose index a bool or a clamp makes; else None."""
    n, producer = len(eqn.params["branches"]), index.producer(eqn, 0)
    name = index.operands(producer)[0] if producer and index.operands(producer) else None
    if name is None:
        return None
    if producer.primitive == "convert_element_type" and producer.input_avals[0].dtype == "bool" and n == 2:
        value = bool(seed % 2)
        wrong = [(branch_text(1 - value), "true-branch-first",
                  "read the branches in lax.cond's argument order, true_fun first; the bool becomes the index, "
                  "so False runs branches[0] and True branches[1]"),
                 ("both: each branch runs and the result is selected", "both-run",
                  "took cond for jnp.where, which computes both sides; a cond runs only the branch its index picks")]
        return f"At run time `{name}` is {value}: which branch does this cond run?", value, int(value), wrong
    bounds = [x for x in producer.inputs if isinstance(x, Literal)]
    if producer.primitive != "clamp" or len(producer.inputs) != 3 or len(bounds) != 2:
        return None
    lo, hi = int(producer.inputs[0].literal), int(producer.inputs[2].literal)
    # By seed: below the range, above it, then each value in it.
    value = [lo - 1, hi + 2, *range(lo, hi + 1)][seed] if seed < hi - lo + 3 else None
    if value is None:
        return None
    answer = min(max(value, lo), hi)
    wrong = [("none: the index is out of range, an error", "out-of-range-error",
              f"expected an index error; the clamp before the cond pins `{name}` into {lo}..{hi}")]
    if value < lo:
        wrong.append((branch_text(n + value), "negative-from-the-end",
                      f"counted {value} from the end, as Python indexing does; the clamp pins it to {lo}"))
    elif value % n != answer:
        wrong.append((branch_text(value % n), "wraps-around",
                      f"took the index modulo the {n} branches; the clamp pins {value} to {hi}"))
    return f"At run time `{name}` is {value}: which branch does this cond run?", value, answer, wrong


def branch_rows(eqn: EqnFact) -> list[tuple[int, int]] | None:
    """The rows (1-based, inclusive, in the cond's printed lines) of each of its branches: from a branch's
    `{ lambda` (`EqnFact.bodies`) to the row before the next one's, the last to its closing brace; None
    where the record does not hold one body per branch."""
    first = eqn.jaxpr_lines[0]
    if not eqn.bodies or len(eqn.bodies) != len(eqn.params["branches"]):
        return None
    starts = [b.first - first + 1 for b in eqn.bodies]
    return [(a, b - 1) for a, b in zip(starts, [*starts[1:], eqn.bodies[-1].last - first + 2])]


def branch_items(program: ProgramRecord, index: ProgramIndex, names: JaxprListing, eqn: EqnFact) -> list[dict]:
    """The `branch` items of a cond: tap the branch that runs for one value of the bool or int that picks
    it, one item per value asked (both bools; for a clamped index, one below, each in range, one above)."""
    if eqn.primitive != "cond":
        return []
    operands, text = names.operands(eqn), equation_text(program, eqn, fold=False)
    producer = index.producer(eqn, 0)
    rows = branch_rows(eqn) if text is not None else None
    if operands is None or rows is None or producer is None:
        return []
    items = []
    for seed in range(len(rows) + 2):
        asked = branch_question(index, eqn, seed)
        if asked is None:
            break
        question, value, answer, wrong = asked
        if any(item["index_value"] == value for item in items):
            continue
        explain = {}
        branch_of = {branch_text(k): k for k in range(len(rows))}
        for option, rule, reason in wrong:
            k = branch_of.get(option)
            if k is not None and k != answer:
                explain.update({str(r): reason for r in range(rows[k][0], rows[k][1] + 1)})
        first, last = rows[answer]
        shown = [text, equation_text(program, producer, fold=False) or "", names.operand_block(eqn, operands)]
        why = _branch_feedback(producer, value, answer)
        items.append({**_jaxpr_item(eqn, "branch", question.replace("which branch does this cond run?",
                                                                     "tap the branch this cond runs."),
                                    [b for b in shown if b], {}, value=str(value)),
                      "form": LinePick(first, tuple(range(first, last + 1)), explain), "feedback": why,
                      "index_eqn": producer.id, "index_value": value})
    return items


def _branch_feedback(producer: EqnFact, value, answer: int) -> str:
    if producer.primitive == "clamp":
        lo, hi = producer.inputs[0].literal, producer.inputs[2].literal
        return f"the clamp pins {value} into {lo}..{hi}, so the index is {answer}: branches[{answer}] runs"
    return f"the bool {value} converts to the index {int(value)}: branches[{answer}] runs, the other never"


def _jaxpr_item(eqn: EqnFact, step: str, question: str, shown: list[str], choice: dict, **facts) -> dict:
    return {"eqn": eqn.id, "layer": "jaxpr", "step": step, "question": question, "shown": shown,
            "jaxpr_lines": list(eqn.jaxpr_lines), **choice, **facts}


def trip_item(program: ProgramRecord, target: str, listing: HloListing, c: Counter, eqn: EqnFact | None
              ) -> dict | None:
    """The `trips` item of one compiled while (of `eqn`, or of no equation in a dump without a jaxpr), or None
    when no misreading differs from the answer."""
    n = c.runs()
    if n is None:
        return None
    misread = {}
    for v, rule, reason in trip_misreadings(c):
        if v != n and str(v) not in misread:
            misread[str(v)] = Misreading(reason, rule)
    if not misread:
        return None
    if not c.exact:
        misread.setdefault(str(n + 1), Misreading("counted the condition's tests, one more than the body's runs", "counted-checks"))
    sym = {"LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "NE": "!="}[c.direction]
    why = (f"the counter starts at {c.init}, moves by {c.step} a run, and the body runs while it is {sym} "
           f"{c.limit}: {n} times" + ("" if c.exact else ", or fewer: the condition also stops it on another test"))
    return {
        "eqn": eqn.id if eqn is not None else None, "layer": target, "step": "trips", "hlo_line": c.line,
        "instruction": c.name,
        "form": Typed("int", str(n), misread=misread), "feedback": why,
        # "At most" for every loop: an exact count is its own bound, and the words give away no early exit.
        # %while is named, not cited by its line: the excerpts below are cut from the listing, not numbered.
        "question": f"At most how many times does the body of %{c.name} run? Type the number.",
        "shown": [which_compile(listing.hlo), _excerpt(listing, c.start), _excerpt(listing, _test_lines(listing, c)),
                  _excerpt(listing, c.update)],
        **({"jaxpr_lines": list(eqn.jaxpr_lines)} if eqn is not None else {"primitive": "while"}),
    }


def _test_lines(listing: HloListing, c: Counter) -> tuple[int, ...]:
    """The condition's lines, with those of the computations its fusions call: a GPU compile fuses the compare
    with the bound's constant, so the bound is printed inside the fused computation."""
    own = range(c.condition[0], c.condition[1] + 1)
    called = (n for line in own if line in listing.at for name in listing.body(line)
              for n in range(listing.computations[name][0], listing.computations[name][1] + 1))
    return tuple(sorted({*own, *called}))


def _excerpt(listing: HloListing, lines: tuple[int, ...]) -> str:
    """These lines of the listing without metadata or backend config, a `⋮` where lines are skipped."""
    out = []
    for k, line in enumerate(lines):
        if k and line != lines[k - 1] + 1:
            out.append("  ⋮")
        out.append(listing.short(line))
    return "\n".join(out)


def trip_items(program: ProgramRecord) -> list[dict]:
    """One `trips` item per compiled while of each TPU and GPU layer whose counter XLA's graph shows; in a dump's
    record, also of its CPU layer. A while is asked where an equation of the jaxpr holds it, or, in a dump
    without a jaxpr, of the compiled while alone."""
    items = []
    backends = ("tpu", "gpu", "cpu") if program.dump is not None else ("tpu", "gpu")
    layers = {k: v for backend in backends for k, v in program.layers(backend).items()}
    for target, hlo in layers.items():
        listing = HloListing(hlo)
        owner = {i.name: i.eqns for i in hlo.instructions}
        for c in counters(hlo):
            loops = [e for e in owner.get(c.name, ()) if program.eqns[e].primitive in LOOPS]
            eqn = program.eqns[max(loops)] if loops else None
            item = trip_item(program, target, listing, c, eqn) if loops or not program.eqns else None
            if item is not None:
                items.append(item)
    return items


def _item(program: ProgramRecord, draft: dict) -> Item:
    """The pool's item for a draft; its card is the loop equation and the step, and for `role` and
    `body-aval` the operand asked about (for `trips`, the compiled while)."""
    layer = draft["layer"]  # jaxpr, or a TPU or GPU layer's compile target id (`trips`)
    about = [draft[k] for k in ("operand", "instruction", "value") if k in draft]
    card = (*((draft["eqn"],) if draft["eqn"] is not None else ()), draft["step"], *about,
            *((layer,) if layer != "jaxpr" else ()))
    context = refer(program, layer, draft["shown"])
    if "form" not in draft:
        return from_draft({k: v for k, v in draft.items() if k != "role"}, card=card, layer=layer, context=context)
    facts = {k: v for k, v in draft.items() if k not in (*_ITEM_FIELDS, "form", "layer", "shown", "role")}
    return Item(answer=draft["form"], card=card, layer=layer, context=context, facts=facts,
                **{k: tuple(v) if k == "jaxpr_lines" else v for k, v in draft.items() if k in _ITEM_FIELDS})


_ITEM_FIELDS = ("question", "eqn", "step", "weight", "feedback", "jaxpr_lines", "primitive")


# A program with more items of one step (rnn-bptt's backward scan alone has ten operands) shares 4 of weight.
@drill("loops", number="07", title="loops, read",
       aim="Tell a loop's consts, carries and xs apart, see what its body gets of each xs, say which branch a "
           "cond runs, and count a compiled while's runs.", per_program=4, cap_by=("step",))
def loop_items(program: ProgramRecord) -> list[Item]:
    """`role` and `body-aval` items for every scan and while, `branch` items for conds, `trips` for compiled whiles."""
    names, index = JaxprListing(program.jaxpr, program.eqns, program.arg_binders), ProgramIndex.of(program)
    items = []
    for eqn in program.eqns:
        if eqn.primitive in LOOPS:
            items += role_items(program, names, eqn) + body_aval_items(program, names, eqn)
        items += branch_items(program, index, names, eqn)
    # A trip count weighted by how many built-in programs ask it (`_spread`): a loop of 5 in every
    # variant of one program must not make `5` the habit that pays.
    items += [{**item, "weight": round(spread_weight(TRIPS_STEP, item["form"].value), 3)} for item in trip_items(program)]
    return [_item(program, item) for item in items] + compiled_branch_items(program)


TRIPS_STEP = "loops/trips"


@answer_step(TRIPS_STEP)
def _trips_asked(program: ProgramRecord) -> list[str]:
    return [item["form"].value for item in trip_items(program)]
