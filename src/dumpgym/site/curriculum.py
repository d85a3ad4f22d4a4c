"""The gym's curriculum: the fluency bar, the path of chapters that sets targets, and the drills in path order."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from dumpgym import drills
from dumpgym.drills import DrillKind


@dataclass(frozen=True)
class Target:
    """A streak to reach in one drill kind; reaching it checks the target off for good."""

    drill: str
    streak: int


@dataclass(frozen=True)
class Chapter:
    """One stop on the path: a chapter of the course (numbered) or of the gym's own (named), what it
    trains, and the streaks that prove it."""

    id: str  # a course chapter's number ("02"), or the name of a chapter the gym added ("loops")
    title: str
    aim: str
    targets: tuple[Target, ...]

    @property
    def number(self) -> str | None:
        """The course's number for this chapter, or None for one of the gym's own."""
        return self.id if self.id.isdigit() else None

    @property
    def label(self) -> str:
        """How the page names the chapter: `chapter 02, jaxprs on sight` or `gym chapter, loops`."""
        return f"{'chapter ' + self.id if self.number else 'gym chapter'}, {self.title}"

    def key(self, target: Target) -> str:
        """The id under which the page records this target as reached."""
        return f"{self.id}/{target.drill}/{target.streak}"


FLUENCY = 10  # "10 in a row is the fluency bar"

# The course's chapters keep its numbers (02, 03, 04 and 12, the bar); the chapters the gym added have
# names instead, so the page shows one numbering and nobody has to reconcile two counters. Drills are
# named by the skill they train, never numbered on the page.
_CHAPTERS = (
    Chapter("02", "jaxprs on sight", "Every binder carries its aval; read the output before you read the op.",
            (Target("shapes", FLUENCY),)),
    Chapter("03", "contractions", "einsum, matmul and attention all become dot_general; decode its axis lists.",
            (Target("decoder", FLUENCY),)),
    Chapter("04", "lowering", "Find what JAX and XLA add between your code and the machine.",
            (Target("decisions", FLUENCY),)),
    Chapter("loops", "loops", "scan, while and cond: tell consts from carries from xs, and count a compiled loop's trips.",
            (Target("loops", FLUENCY),)),
    Chapter("backward", "the backward pass", "Match each backward dot_general to the forward operand it differentiates, "
            "and name what a checkpoint policy saves.", (Target("backward", FLUENCY),)),
    Chapter("sharding", "sharding", "Read a sharding down to each device's block and a collective's groups back to "
            "mesh axes.", (Target("partitioner", FLUENCY),)),
    Chapter("buffers", "buffers", "Donation, layouts and copies: which buffers XLA reuses, reorders or really moves.",
            (Target("buffers", FLUENCY),)),
    Chapter("tpu", "the TPU layer", "Read what libtpu compiled: tiled layouts and memory spaces, which unit runs "
            "each instruction, and what it fused.",
            (Target("layouts", FLUENCY), Target("units", FLUENCY), Target("fusions", FLUENCY))),
)


def _in_path_order(chapters) -> dict[str, int]:
    """Each drill kind the chapters set a target in, by the place of the first such target."""
    order: dict[str, int] = {}
    for t in (t for ch in chapters for t in ch.targets):
        order.setdefault(t.drill, len(order))
    return order


@cache
def _path() -> tuple[Chapter, ...]:
    # Chapter 12 asks for every registered drill kind, so a kind added later is in the bar without an
    # edit here: those of the chapters before it in their order, then the rest in the registry's.
    first = _in_path_order(_CHAPTERS)
    every = sorted(drills.kinds().values(), key=lambda k: (first.get(k.name, len(first)), k.number))
    bar = Chapter("12", "the bar", "Read any dump on sight: twice the fluency bar, in every drill.",
                  tuple(Target(k.name, 2 * FLUENCY) for k in every))
    return (*_CHAPTERS, bar)


def __getattr__(name: str):
    """`PATH`, the chapters in order, computed on first use (chapter 12 reads the registered drill kinds)."""
    if name == "PATH":
        return _path()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def drill_kinds(pool: dict) -> list[DrillKind]:
    """The drill kinds to show (`drills.DrillKind`s), as the pool names them, in path order: by the first
    chapter that sets a target in each, then any kind the path does not name, in the pool's order."""
    order = _in_path_order(_path())
    named = [DrillKind(k["name"], k["number"], k["title"], k["aim"]) for k in pool["kinds"]]
    return sorted(named, key=lambda k: order.get(k.name, len(order)))


def first_step(kinds: list[DrillKind]) -> tuple[Chapter, Target, DrillKind] | None:
    """Where a fresh profile starts: the first target on the path in a drill kind the page shows, with its
    chapter and kind (None when the page shows none of the path's kinds)."""
    shown = {k.name: k for k in kinds}
    return next(((ch, t, shown[t.drill]) for ch in _path() for t in ch.targets if t.drill in shown), None)
