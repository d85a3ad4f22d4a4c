"""A corpus with a program of the learner's own, for the tests of how the page shows added programs."""
import copy


def with_an_added_program(corpus: dict) -> dict:
    """mlp and ckpt-policy built in (the second has `kernels` items), and a copy of mlp added by the learner as
    `mine`, compiled for the CPU alone."""
    data = copy.deepcopy(corpus)
    keep = [p for p in data["programs"] if p["slug"] in ("mlp", "ckpt-policy")]
    mine = copy.deepcopy(keep[0])
    mine.update(slug="mine", title="my block", lesson="Two dots and a gelu, as I wrote them.", added=True)
    mine["compiled"] = {"cpu": mine["compiled"]["cpu"]}
    data["programs"] = keep + [mine]
    return data
