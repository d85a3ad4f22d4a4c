"""What every multiple-choice drill item must be, whatever its kind, and how the drill tests read an item:
shared by the drill tests."""
from __future__ import annotations

from dumpgym.drills.item import Item, resolve
from dumpgym.record.schema import ProgramRecord


def readable(item: dict | Item, program: ProgramRecord | dict, others: dict | None = None) -> dict:
    """A `dumpgym.drills/2` item as the drill tests read it: its JSON, with `shown` its context resolved
    against the program (exactly the blocks the page shows), its answer form's fields beside its own
    (`options`, `answer` the right option's index, `reasons`, `rules`; or `answer_line`, `accepted_lines`,
    `explain`; or `answer_lines`; or `value`, `spelling`, `misread`; or `axes`, `dims`, `label`; and `form`,
    the form's name, with any other field of it), `kind` for a decision's step, and its facts (`hlo_line`, `fusion`, ...).
    `others`, records by slug, are read for a block that shows another program's listing (a change's partner)."""
    data = item.to_json() if isinstance(item, Item) else item
    record = program if isinstance(program, ProgramRecord) else ProgramRecord.from_json(program)
    form = data["answer"]
    out = {k: v for k, v in data.items() if k not in ("answer", "facts")}
    out.update(data.get("facts", {}))
    out["shown"] = resolve(data["context"], record, others)
    if form["form"] == "choice":
        out.update(options=form["options"], answer=form["index"], reasons=form["reasons"], rules=form["rules"])
    elif form["form"] == "line":
        out.update(answer_line=form["line"], accepted_lines=form["accepted"], explain=form["explain"])
        out["kind"] = data["step"]
    elif form["form"] == "lines":
        out.update(answer_lines=form["lines"], explain=form["explain"])
    elif form["form"] == "typed":
        out.update(value=form["value"], spelling=form["spelling"], accepted=form.get("accepted", []),
                   misread=form.get("misread", {}))
    elif form["form"] == "axes":
        out.update(axes=form["axes"], dims=form["dims"], label=form["label"], misread=form.get("misread", {}))
    if form["form"] not in ("choice", "line"):  # and `form`, the form's name, with its other fields
        out.update({k: v for k, v in form.items() if k not in out})
    return out


def readable_pool(pool: dict, corpus: dict) -> list[dict]:
    """Every item of a pool, `readable`."""
    records = {p["slug"]: ProgramRecord.from_json(p) for p in corpus["programs"]}
    return [readable(i, records[i["program"]], records) for i in pool["items"]]


def assert_choice_item(item: dict) -> None:
    """`shown` blocks, a weight, 3 or 4 distinct options, and a rule and reason for each wrong one only."""
    assert isinstance(item["shown"], list) and all(isinstance(b, str) and b for b in item["shown"])
    assert 0 < item["weight"] <= 1
    options = item["options"]
    assert 3 <= len(options) <= 4 and len(set(options)) == len(options)
    assert len(item["reasons"]) == len(item["rules"]) == len(options)
    for k, (reason, rule) in enumerate(zip(item["reasons"], item["rules"])):
        assert (reason == "" and rule == "") == (k == item["answer"]), item


def kind_items(program: ProgramRecord, kind: str) -> list[dict]:
    """One kind's items of one program as the pool holds them (stamped, weighted under the kind's cap),
    `readable`."""
    from dumpgym.drills import items_for

    return [readable(i, program) for i in items_for(program) if i.drill == kind]


def assert_pool_item(item: dict, eqn_ids: set[int]) -> None:
    """What every item of a `dumpgym.drills/2` pool must be (`eqn_ids`: its program's equations): a registered kind
    and layer, a card of its kind and program, a question, a context and a weight, and an answer form that is
    whole: a choice with a reason for each wrong option only, or a built answer that reads back as itself and
    grades its own answer right."""
    from dumpgym.drills import kinds
    from dumpgym.drills.answer import from_json as answer_from_json
    from dumpgym.drills.item import FORMS, LOWERED
    from dumpgym.record.targets import TARGETS

    assert item["drill"] in kinds() and item["layer"] in (*LOWERED, *TARGETS)
    assert item["card"].startswith(f"{item['drill']}/{item['program']}/")
    assert item["eqn"] is None or item["eqn"] in eqn_ids
    assert item["question"].endswith("?") or item["question"].endswith(".")
    assert item["context"] and 0 < item["weight"]
    form = item["answer"]
    assert form["form"] in FORMS
    if item["drill"] == "decisions" and form["form"] != "choice":  # its spot items: picking a line
        assert form["form"] == "line" and item["layer"] in ("jaxpr", "stablehlo") and item["step"]
        assert form["line"] >= 1 and form["line"] in form["accepted"]
    elif form["form"] == "choice":
        assert 0 <= form["index"] < len(form["options"]) == len(form["reasons"]) == len(form["rules"])
        assert len(set(form["options"])) == len(form["options"]) >= 2
        assert all(bool(r) == (k != form["index"]) for k, r in enumerate(form["reasons"]))
    else:  # a built answer: it reads back as itself, and its own answer grades right
        built = answer_from_json(form)
        assert built.to_json() == form
        right = {"typed": lambda: form["value"], "axes": lambda: form["axes"], "lines": lambda: form["lines"],
                 "line": lambda: form["line"]}[form["form"]]()
        assert built.check(right).right, item["card"]
