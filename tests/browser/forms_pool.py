"""A small pool of the answer forms the learner builds (`typed`, `axes`, `lines`) and of tapped `line`s,
taken as they are from the real pool, for the browser tests of the page's views: shapes items are a
`typed` aval (with named misreadings), decoder lhs-free and rhs-free items are `axes` on an operand's
shape, fusions items are `lines` of the jaxpr, and decisions items are a `line`. Nothing here is an answer
of its own: every item is the kind's own, so the page is tested on what the kinds produce."""
from __future__ import annotations


def _spread(items: list[dict], count: int) -> list[dict]:
    """Up to `count` of `items`, from as many programs as there are, in pool order."""
    seen, first, rest = set(), [], []
    for item in items:
        (rest if item["program"] in seen else first).append(item)
        seen.add(item["program"])
    return (first + rest)[:count]


def forms_pool(pool: dict, corpus: dict) -> dict:
    """`pool`'s kinds, with only these items: shapes typed, decoder lhs/rhs-free axes, fusions line sets
    (a few of each, from different programs), and decisions line items."""
    items = pool["items"]

    def of(kind, form, steps=None):
        return [i for i in items if i["drill"] == kind and i["answer"]["form"] == form
                and (steps is None or i.get("step") in steps)]

    typed = _spread([i for i in of("shapes", "typed") if i["answer"].get("misread")], 12)
    axes = _spread(of("decoder", "axes", ("lhs-free", "rhs-free")), 12)
    lines = _spread(of("fusions", "lines"), 4)
    decisions = of("decisions", "line")[:6]
    for name, got in (("shapes typed", typed), ("decoder axes", axes), ("fusions lines", lines),
                      ("decisions line", decisions)):
        assert len(got) >= 2, f"the pool has {len(got)} {name} items: the forms tests need two"
    kinds = ("shapes", "decoder", "fusions", "decisions")
    return {"schema": pool["schema"], "kinds": [k for k in pool["kinds"] if k["name"] in kinds],
            "items": typed + axes + lines + decisions}
