"""GYM·07, loops: read a `scan`, `while` or `cond` equation's operands and params, and count a compiled while's runs.

Four questions (`step`), every scan, while and cond included, nested ones too:

- `role` (jaxpr): what is this operand to the loop? A scan's operands are its consts, then the
  initial carries, then the xs (`num_consts`, `num_carry`); a while's are the condition's consts,
  the body's consts, then the initial loop state (`cond_nconsts`, `body_nconsts`).
- `body-aval` (jaxpr): what aval does one iteration of a scan's body see for an xs operand? The
  slice along axis 0. The body is never shown: its binders print the answer.
- `branch` (jaxpr): which branch does a `cond` run for a given predicate or index? The index is
  read off the equation that makes it: a bool converted to an int (lax.cond: the False branch is
  `branches[0]`) or a `clamp` into range (lax.switch).
- `trips` (each TPU layer): how many times does the body of a compiled while run? Read from the TPU
  compile's recorded counters (`CompiledLayer.while_counters`, read through XLA's graph when it was
  compiled): the counter's start, step and the constant the condition compares it with.
"""
from __future__ import annotations

import re

from dumpgym.drills import drill
from dumpgym.drills._avals import choice_item
from dumpgym.drills._layers import text_lines
from dumpgym.drills._loops import Counter, counters, runs_text, trip_misreadings
from dumpgym.drills._program_index import ProgramIndex
from dumpgym.drills._tpu import Listing as HloListing, short, which_compile
from dumpgym.drills.item import Item, from_draft, refer
from dumpgym.drills.shapes import Listing as JaxprListing
from dumpgym.record import Aval, EqnFact, Literal, ProgramRecord

LOOPS = ("scan", "while")

SCAN_ROLES = {
    "const": "a const: every iteration reads it whole, unchanged",
    "carry": "a carry: the loop state's first value, replaced by each iteration's result",
    "xs": "an xs: sliced along axis 0, one slice per iteration",
}
WHILE_ROLES = {
    "cond-const": "a const of the condition (cond_jaxpr), read by every test",
    "body-const": "a const of the body (body_jaxpr), read by every run",
    "carry": "the loop state's first value: a carry, replaced by each run's result",
}


# ---------------------------------------------------------------------------------------------
# The equation as shown: its printed lines with every sub-jaxpr folded away.

def fold_bodies(text: str) -> str:
    """The printed equation with each `{ lambda ... }` sub-jaxpr written `{ … }`: its binders print the answers."""
    out, at = [], 0
    for start in (m.start() for m in re.finditer(r"\{ lambda", text)):
        if start < at:
            continue
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        out += [text[at:start], "{ … }"]
        at = end + 1
    return "".join(out) + text[at:]


def equation_text(program: ProgramRecord, eqn: EqnFact, fold: bool = True) -> str | None:
    """The equation's lines, dedented (bodies folded unless told); None when they do not read `... = primitive`."""
    first, last = eqn.jaxpr_lines
    lines = text_lines(program.jaxpr)[first - 1:last]
    if not re.search(rf" = {eqn.primitive}\b", "\n".join(lines)):
        return None
    indent = len(lines[0]) - len(lines[0].lstrip())
    text = "\n".join(line[indent:] for line in lines)
    return fold_bodies(text) if fold else text


# ---------------------------------------------------------------------------------------------
# Roles: where each operand sits, read right and under each misreading.

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
        if len(wrong) < 2:
            continue
        items.append(_jaxpr_item(eqn, "role", f"What is `{name}` (operand {i}) to this {eqn.primitive}?", shown,
                                 choice_item(labels[truth[i]], wrong, program.slug, "role", eqn.id, i), operand=i))
    return items


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
        question = f"What aval does one iteration of the body see for the xs operand `{operands[i]}`?"
        items.append(_jaxpr_item(eqn, "body-aval", question, shown,
                                 choice_item(answer, wrong, program.slug, "body-aval", eqn.id, i), operand=i))
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
    value = hi + 2 if seed % 2 else lo - 1
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


def branch_items(program: ProgramRecord, index: ProgramIndex, names: JaxprListing, eqn: EqnFact) -> list[dict]:
    """The `branch` item of a cond: which branch runs for one value of the bool or int that picks it."""
    asked = branch_question(index, eqn, eqn.id) if eqn.primitive == "cond" else None  # the id varies the value asked
    operands = names.operands(eqn)
    text = equation_text(program, eqn, fold=False)
    if asked is None or operands is None or text is None or len(asked[3]) < 2:
        return []
    question, value, answer, wrong = asked
    producer = index.producer(eqn, 0)
    shown = [equation_text(program, producer, fold=False) or "", text, names.operand_block(eqn, operands)]
    item = _jaxpr_item(eqn, "branch", question, [b for b in shown if b],
                       choice_item(branch_text(answer), wrong, program.slug, "branch", eqn.id))
    return [{**item, "index_eqn": producer.id, "index_value": value}]


def _jaxpr_item(eqn: EqnFact, step: str, question: str, shown: list[str], choice: dict, **facts) -> dict:
    return {"eqn": eqn.id, "layer": "jaxpr", "step": step, "question": question, "shown": shown,
            "jaxpr_lines": list(eqn.jaxpr_lines), **choice, **facts}


def trip_item(program: ProgramRecord, target: str, listing: HloListing, c: Counter, eqn: EqnFact) -> dict | None:
    """The `trips` item of one compiled while, or None when fewer than two misreadings differ from the answer."""
    n = c.runs()
    if n is None:
        return None
    answer = runs_text(n, c.exact)
    wrong, seen = [], {answer}
    if not c.exact:
        seen.add(runs_text(n, True))
        wrong.append((runs_text(n, True), "missed-early-exit",
                      f"read only the test of {c.limit}; the condition joins it with another test by `and`, "
                      "which can end the loop sooner"))
    for v, rule, reason in trip_misreadings(c):
        if runs_text(v, c.exact) not in seen and len(wrong) < 3:
            seen.add(runs_text(v, c.exact))
            wrong.append((runs_text(v, c.exact), rule, reason))
    if len(wrong) < 2:
        return None
    return {
        "eqn": eqn.id, "layer": target, "step": "trips", "hlo_line": c.line, "instruction": c.name,
        "question": f"How many times does the body of %{c.name} run (TPU compiled HLO line {c.line})?",
        "shown": [which_compile(listing.hlo), _excerpt(listing, c.start),
                  _excerpt(listing, tuple(range(c.condition[0], c.condition[1] + 1))), _excerpt(listing, c.update)],
        "jaxpr_lines": list(eqn.jaxpr_lines),
        **choice_item(answer, wrong, program.slug, "trips", c.name),
    }


def _excerpt(listing: HloListing, lines: tuple[int, ...]) -> str:
    """These lines of the listing without metadata or backend config, a `⋮` where lines are skipped."""
    out = []
    for k, line in enumerate(lines):
        if k and line != lines[k - 1] + 1:
            out.append("  ⋮")
        out.append(short(listing.lines[line - 1]))
    return "\n".join(out)


def trip_items(program: ProgramRecord) -> list[dict]:
    """One `trips` item per compiled while of each TPU layer whose counter XLA's graph shows."""
    items = []
    for target, hlo in program.layers("tpu").items():
        listing = HloListing(hlo)
        owner = {i.name: i.eqns for i in hlo.instructions}
        for c in counters(hlo):
            loops = [e for e in owner.get(c.name, ()) if program.eqns[e].primitive in LOOPS]
            item = trip_item(program, target, listing, c, program.eqns[max(loops)]) if loops else None
            if item is not None:
                items.append(item)
    return items


def _item(program: ProgramRecord, draft: dict) -> Item:
    """The pool's item for a draft; its card is the loop equation and the step, and for `role` and
    `body-aval` the operand asked about (for `trips`, the compiled while)."""
    layer = draft["layer"]  # jaxpr, or a TPU layer's compile target id (`trips`)
    about = [draft[k] for k in ("operand", "instruction") if k in draft]
    card = (draft["eqn"], draft["step"], *about, *((layer,) if layer != "jaxpr" else ()))
    return from_draft(draft, card=card, layer=layer, context=refer(program, layer, draft["shown"]))


# A program with more items of one step (rnn-bptt's backward scan alone has ten operands) shares 4 of weight.
@drill("loops", number="07", title="loops, read",
       aim="Tell a loop's consts, carries and xs apart, see what its body gets of each xs, say which branch a "
           "cond runs, and count a compiled while's runs.", per_program=4, cap_by=("step",))
def loop_items(program: ProgramRecord) -> list[Item]:
    """`role` and `body-aval` items for every scan and while, `branch` items for conds, `trips` for compiled whiles."""
    names, index = JaxprListing(program.jaxpr, program.eqns), ProgramIndex.of(program)
    items = []
    for eqn in program.eqns:
        if eqn.primitive in LOOPS:
            items += role_items(program, names, eqn) + body_aval_items(program, names, eqn)
        items += branch_items(program, index, names, eqn)
    items += trip_items(program)
    return [_item(program, item) for item in items]
