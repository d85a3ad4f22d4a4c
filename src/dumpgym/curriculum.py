"""The gym's curriculum: the x-ray's place, the fluency bar, and the path of chapters that sets targets."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from dumpgym import drills
from dumpgym.drills import XRAY_SECTION, DrillKind  # noqa: F401  (XRAY_SECTION: the page reads it here, with the path)


@dataclass(frozen=True)
class Target:
    """A streak to reach in one drill kind; reaching it checks the target off for good."""

    drill: str
    streak: int


@dataclass(frozen=True)
class Chapter:
    """One stop on the path: a book chapter, what it trains, and the streaks that prove it."""

    number: str
    title: str
    aim: str
    targets: tuple[Target, ...]

    def key(self, target: Target) -> str:
        """The id under which the page records this target as reached."""
        return f"{self.number}/{target.drill}/{target.streak}"


FLUENCY = 10  # "10 in a row is the fluency bar"

# Chapter numbers are the seed curriculum's (our own sequence of reading skills), not the gym floor's:
# chapter 04 is lowering, not the x-ray. Each chapter names the drills it sets targets in.
_CHAPTERS = (
    Chapter("02", "jaxprs on sight", "Every binder carries its aval; read the output before you read the op.",
            (Target("shapes", FLUENCY),)),
    Chapter("03", "contractions", "einsum, matmul and attention all become dot_general; decode its axis lists.",
            (Target("decoder", FLUENCY),)),
    Chapter("04", "lowering", "Find what JAX and XLA add between your code and the machine.",
            (Target("decisions", FLUENCY),)),
    Chapter("05", "loops", "scan, while and cond: tell consts from carries from xs, and count a compiled loop's trips.",
            (Target("loops", FLUENCY),)),
    Chapter("06", "the backward pass", "Match each backward dot_general to the forward operand it differentiates, "
            "and name what a checkpoint policy saves.", (Target("backward", FLUENCY),)),
    Chapter("07", "sharding", "Read a sharding down to each device's block and a collective's groups back to "
            "mesh axes.", (Target("partitioner", FLUENCY),)),
    Chapter("08", "buffers", "Donation, layouts and copies: which buffers XLA reuses, reorders or really moves.",
            (Target("buffers", FLUENCY),)),
    Chapter("11", "the TPU layer", "Read what libtpu compiled: tiled layouts and memory spaces, which unit runs "
            "each instruction, and what it fused.",
            (Target("layouts", FLUENCY), Target("units", FLUENCY), Target("fusions", FLUENCY))),
)


@cache
def _path() -> tuple[Chapter, ...]:
    # Chapter 12 asks for every registered drill kind, so a kind added later is in the bar without an
    # edit here.
    every = sorted(drills.kinds().values(), key=lambda k: k.number)
    bar = Chapter("12", "the bar", "Read any dump on sight: twice the fluency bar, in every drill.",
                  tuple(Target(k.name, 2 * FLUENCY) for k in every))
    return (*_CHAPTERS, bar)


def __getattr__(name: str):
    """`PATH`, the chapters in order, computed on first use (chapter 12 reads the registered drill kinds)."""
    if name == "PATH":
        return _path()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def drill_kinds(pool: dict) -> list[DrillKind]:
    """The drill kinds to show (`drills.DrillKind`s), in gym order, as the pool names them."""
    return [DrillKind(k["name"], k["number"], k["title"], k["aim"]) for k in pool["kinds"]]
