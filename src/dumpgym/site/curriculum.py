"""The gym's curriculum: the fluency bar, the path of chapters that sets targets, and the drills in path order."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from dumpgym import drills
from dumpgym.drills import DrillKind


@dataclass(frozen=True)
class Target:
    """A streak to reach in one drill kind; reaching it checks the target off for good."""

    drill: str
    streak: int


@dataclass(frozen=True)
class Example:
    """Which drill item a step's worked example is: the first item of this kind (and step, and primitive)
    the pool holds with a small screen; the page shows it answered, from the corpus, never typed here."""

    drill: str
    step: str | None = None
    primitive: str | None = None


@dataclass(frozen=True)
class Chapter:
    """One step of the path: its place (`step`, from 1), the guide's chapter it serves (`id` a number) or
    a name of the gym's own, a lesson in our words with a worked example, and the streaks that prove it."""

    id: str  # the guide's chapter number ("02"), or the name of a step the gym added ("loops")
    title: str
    aim: str
    targets: tuple[Target, ...]
    lesson: str = ""  # the notation the step needs, said once before its first drill
    example: Example | None = None
    step: int = 0  # its place on the path, from 1 (set by `_path`)

    @property
    def number(self) -> str | None:
        """The guide's chapter number this step serves, or None for one of the gym's own."""
        return self.id if self.id.isdigit() else None

    @property
    def label(self) -> str:
        """How the page names the step: `step 1, jaxprs on sight (guide chapter 02)` or `step 4, loops`."""
        return f"step {self.step}, {self.title}" + (f" (guide chapter {self.id})" if self.number else "")

    def key(self, target: Target) -> str:
        """The id under which the page records this target as reached."""
        return f"{self.id}/{target.drill}/{target.streak}"


FLUENCY = 10  # "10 in a row is the fluency bar"

# The steps are numbered 1..N in path order; a step that serves a chapter of the guide (02, 03, 04 and 12,
# the bar) names it after its number, and the steps the gym added have names only. Drills are named by
# the skill they train, never numbered on the page. Each lesson says, in our words, the notation its
# drills ask about; its worked example is a real item, answered, chosen by `Example` when the page is made.
_CHAPTERS = (
    Chapter("02", "jaxprs on sight", "Every binder carries its aval; read the output before you read the op.",
            (Target("shapes", FLUENCY),),
            lesson="A jaxpr is a list of equations, `outvars = primitive[params] invars`, and every variable "
                   "carries its aval, dtype then shape: `f32[64,512]` is a 64×512 array of 32-bit floats, "
                   "`f32[]` a scalar. Work out an equation's output from its inputs' avals and its params "
                   "before you read its name: a reduction drops the axes in `axes`, a `dot_general` keeps the "
                   "free axes, a cast changes the dtype only.",
            example=Example("shapes", primitive="dot_general")),
    Chapter("03", "contractions", "einsum, matmul and attention all become dot_general; decode its axis lists.",
            (Target("decoder", FLUENCY),),
            lesson="Every matmul, einsum and attention score becomes one `dot_general`. Its "
                   "`dimension_numbers=((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))` name the "
                   "axes summed away and the axes matched one for one; every other axis is free. The output "
                   "lists the batch axes, then the lhs's free axes, then the rhs's.",
            example=Example("decoder", step="output-axis")),
    Chapter("04", "lowering", "Find what JAX and XLA add between your code and the machine.",
            (Target("decisions", FLUENCY),),
            lesson="jnp and autodiff write equations you never typed: a `broadcast_in_dim` before a bias add, "
                   "a `convert_element_type` to f32 before a sum of bf16 values, a `transpose` after an einsum "
                   "or in a matmul's gradient, an `iota` that a comparison turns into a mask. The StableHLO "
                   "shows the same steps one level down (`stablehlo.broadcast_in_dim`, `stablehlo.convert`).",
            example=Example("decisions", step="hidden-broadcast")),
    Chapter("loops", "loops", "scan, while and cond: tell consts from carries from xs, and count a compiled loop's trips.",
            (Target("loops", FLUENCY),),
            lesson="A `scan` takes its operands in three runs: `num_consts` consts, read whole by every "
                   "iteration; then `num_carry` carries, replaced by each iteration's result; then the xs, cut "
                   "along their leading axis, one slice per iteration, `length` times. Compiled, a loop is a "
                   "`while`: its runs follow from where the counter starts, its step and the condition's bound.",
            example=Example("loops", step="role")),
    Chapter("backward", "the backward pass", "Match each backward dot_general to the forward operand it differentiates, "
            "and name what a checkpoint policy saves.", (Target("backward", FLUENCY),),
            lesson="`jax.grad` writes the backward pass into the same jaxpr, after the forward one: each forward "
                   "`dot_general` gets backward ones that multiply the incoming cotangent by one of its operands, "
                   "which gives the gradient with respect to the other. A value the forward pass made and the "
                   "backward reads is a residual: saved, unless a checkpoint (`remat2`) recomputes it.",
            example=Example("backward", step="wrt")),
    Chapter("sharding", "sharding", "Read a sharding down to each device's block and a collective's groups back to "
            "mesh axes.", (Target("partitioner", FLUENCY),),
            lesson="StableHLO prints a sharded array whole, `tensor<64x32xf32>`, with its sharding beside it: "
                   "`#sdy.sharding<@mesh, [{\"x\"}, {}]>` cuts axis 0 over the mesh axis `x` and keeps axis 1 "
                   "whole, so with `x`=8 each device holds an 8×32 block. A compiled collective's "
                   "`replica_groups` list the devices that exchange; the mesh axis they differ in is the one it "
                   "runs over.",
            example=Example("partitioner", step="shard-shape")),
    Chapter("buffers", "buffers", "Donation, layouts and copies: which buffers XLA reuses, reorders or really moves.",
            (Target("buffers", FLUENCY),),
            lesson="A compiled listing prints each array with its layout: in `f32[64,128]{1,0}` the braces list "
                   "the axes minor first (`minor_to_major`), so axis 1 changes fastest in memory. A `copy` "
                   "writes the bytes anew; a `bitcast` only relabels bytes already in place. The module's "
                   "`input_output_alias` names the parameters whose buffers a result may take over (donation).",
            example=Example("buffers", step="major-axis")),
    Chapter("tpu", "the TPU layer", "Read what libtpu compiled: tiled layouts and memory spaces, which unit runs "
            "each instruction, and what it fused.",
            (Target("layouts", FLUENCY), Target("units", FLUENCY), Target("fusions", FLUENCY)),
            lesson="A TPU layout adds tiles: `bf16[512,128]{1,0:T(8,128)(2,1)}` stores the array in 8×128 tiles, "
                   "each of its two minor axes padded up to a multiple of its tile, and `(2,1)` packs two bf16 "
                   "values into each 32-bit word; `S(1)` marks a buffer in VMEM, the on-chip memory. The MXU "
                   "runs the matrix multiplies (`convolution`, or a `fusion` around one), the VPU the "
                   "elementwise work.",
            example=Example("layouts", step="padded-shape")),
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
                  tuple(Target(k.name, 2 * FLUENCY) for k in every),
                  lesson="No new notation: every listing the steps before taught you to read, mixed, and twice "
                         "the fluency bar in each drill.")
    return tuple(replace(ch, step=n) for n, ch in enumerate((*_CHAPTERS, bar), start=1))


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
