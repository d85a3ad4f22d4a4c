"""A dumped jaxpr's equations read from its text (`JAX_DUMP_IR_TO` with mode `jaxpr`), as `EqnFact`s.

No parser of jaxpr text exists outside a trace, so this one reads what JAX's printer writes, in one
pass over the text (linear: a cursor that never goes back, no pattern that can backtrack): each
equation's output binders (`c:f32[8,4]`), primitive, params (`[dimension_numbers=(([1], [0]), ([], []))
...]`), inputs (a variable's aval from its binder, a literal as printed, `0.5:f32[]`) and the lines it
spans; an equation inside a sub-jaxpr (`jaxpr={ lambda ...}`, cond's `branches=(...)`) has the
equation holding it as `parent`, and the param that holds it (`held_in`: a `while`'s `cond_jaxpr` or
`body_jaxpr`). Ids follow print order, as a traced program's do. Each input's `Source` is read from the
names (the binder of that name in the same jaxpr: an equation's output, or the jaxpr's own constvar or
invar), and how the jaxpr prints the equation from `ir/jaxpr.py` (`read_equation`), as a trace's facts are.

The word `in` is a variable's name too (the 222nd the printer gives: `a`..`z`, `ba`..): the keyword that
ends a jaxpr is always followed by its results in parentheses, `in (`, and a variable never is.

What the text does not hold is left out, never made up: a param whose value is not plain (a
function, `<lambda>`, a sharding object) is not kept; an equation reading a variable whose binder
is not printed keeps no inputs; weak types are not printed, so no aval is weakly typed.
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass

from dumpgym.ir.jaxpr import read_arguments, read_equation
from dumpgym.ir.parse import printed_dims
from dumpgym.record.dtypes import long as long_dtype
from dumpgym.record.schema import JAXPR_PLACEHOLDER, Aval, Binder, EqnFact, Literal, Source

_MAX_DEPTH = 200  # sub-jaxprs and params nested deeper than any program JAX prints: the text is not a jaxpr
# Words JAX's printer writes among a primitive's params that are none of its params (a custom rule's `name=`,
# the function's): not kept, so every param read is one the equation has.
_PRINTED_ONLY = {"custom_vjp_call": frozenset({"name", "fwd", "bwd"}), "custom_jvp_call": frozenset({"name", "jvp"})}
# Params JAX's printer leaves out (its `pp_eqn_rules` in `lax.py`), with the value each then has: a default it
# drops (`None`, an empty tuple) or what the output binder's type implies (its shape). "shape" stands for the
# output's shape, None for None, () for an empty list. A sharding it leaves out is not put back: a replicated
# one prints no marks on the type, as no sharding does.
_UNPRINTED_ACCURACY = {"accuracy": None}
_LEFT_OUT = {
    "broadcast_in_dim": {"broadcast_dimensions": (), "shape": "shape"},
    "dot_general": {"precision": None, "preferred_element_type": None},
    "mul": {"out_dtype": None},
    **{p: _UNPRINTED_ACCURACY for p in ("exp", "exp2", "log", "expm1", "log1p", "tanh", "logistic", "sin", "cos",
                                        "tan", "sqrt", "rsqrt", "cbrt")},
}
_OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_STOP = " \t\n,()[]{}<>"


class _NotAJaxpr(Exception):
    pass


class _Unplain:
    """A param value that is not plain (a function, an object printed with its fields): not kept."""


_UNPLAIN = _Unplain()


@dataclass(frozen=True)
class DumpedJaxpr:
    """What a dumped jaxpr's text holds: its equations, the param of its container each inner one sits in,
    and the top-level jaxpr's arguments as it binds them."""

    eqns: tuple[EqnFact, ...]
    held_in: dict[int, str]  # an equation inside a sub-jaxpr -> the container's param holding it (`cond_jaxpr`)
    arguments: tuple[Binder, ...]


def jaxpr_eqn_facts(text: str) -> tuple[EqnFact, ...] | None:
    """Every printed equation of a dumped jaxpr, sub-jaxprs' included, in print order; None when the
    text is not one jaxpr as JAX prints it (nothing is then read from it)."""
    read = read_jaxpr(text)
    return read.eqns if read is not None else None


def read_jaxpr(text: str) -> DumpedJaxpr | None:
    """A dumped jaxpr read once, front to back (`DumpedJaxpr`); None when the text is not one jaxpr as JAX
    prints it."""
    reader = _Reader(text)
    try:
        reader.skip_space()
        # A sub-jaxpr JAX hoists (a named `jit`'s, a shared one) prints first, `let NAME = { lambda ... } in`,
        # and its callers name it (`jaxpr=NAME`): its equations' parent is its first caller, as in a trace.
        while reader.text.startswith("let ", reader.at):
            reader.at += 4
            name = reader.token()
            reader.expect("=")
            reader.hoisted[name] = []
            reader.jaxpr(name, 0)
            reader.expect("in")
            reader.skip_space()
        reader.jaxpr(None, 0)
        reader.skip_space()
        if reader.at < len(text):
            return None  # something after the one jaxpr
    except (_NotAJaxpr, IndexError, ValueError, RecursionError):
        return None
    eqns, held_in = [], {}
    for eqn in reader.eqns:
        key = reader.held_in.get(eqn.id)
        if isinstance(eqn.parent, str):
            callers = reader.hoisted.get(eqn.parent)
            first = min(callers) if callers else None
            key = reader.hoisted_as.get((eqn.parent, first))
            eqn = dataclasses.replace(eqn, parent=first)
        if eqn.parent is not None and key is not None:
            held_in[eqn.id] = key
        eqns.append(eqn)
    return DumpedJaxpr(tuple(eqns), held_in, read_arguments(reader.lines))


def _aval(binder: str) -> Aval | None:
    """`f32[8,16]` (or `key<fry>[]`, a sharded `f32[64@x]` or `f32[32,64@(x,y)]`, one varying over manual axes
    `f32[8,32]{V:x}`) as an aval, or None."""
    marks = binder.find("]{")
    if marks != -1 and binder.endswith("}"):
        binder = binder[:marks + 1]
    open_at = binder.find("[")
    if open_at <= 0 or not binder.endswith("]"):
        return None
    dtype, dims = binder[:open_at], binder[open_at + 1:-1]
    try:
        shape = printed_dims(dims)
    except ValueError:
        return None
    return Aval(shape, long_dtype(dtype) or dtype)


def _with_left_out(primitive: str, params: dict, outputs: list[Aval]) -> dict:
    """The params with those JAX's printer leaves out of this primitive's equation (`_LEFT_OUT`) put back, each
    where the printed text implies its value; sorted by name, as a trace's facts are."""
    left_out = _LEFT_OUT.get(primitive)
    if not left_out or len(outputs) != 1:
        return params
    out = dict(params)
    for key, value in left_out.items():
        if key in out:
            continue
        out[key] = list(outputs[0].shape) if value == "shape" else [] if value == () else value
    return dict(sorted(out.items()))


def _plain(token: str):
    """A plain param value as the trace's facts write it: a bool, None, a number, or the word."""
    if token in ("True", "False"):
        return token == "True"
    if token == "None":
        return None
    for kind in (int, float):
        try:
            value = kind(token)
        except ValueError:
            continue
        return value if kind is int or value == value and abs(value) != float("inf") else token
    return token


class _Reader:
    """A cursor over a jaxpr's text, reading it front to back once."""

    def __init__(self, text: str):
        self.text = text
        self.at = 0
        self.eqns: list[EqnFact | None] = []
        self.hoisted: dict[str, list[int]] = {}  # a hoisted sub-jaxpr's name -> the equations that call it
        self.hoisted_as: dict[tuple[str, int], str] = {}  # (hoisted name, caller) -> the caller's param naming it
        self.held_in: dict[int, str] = {}  # an equation read inside a param's sub-jaxpr -> that param
        self._param: list[str | None] = [None]  # the param being read, innermost last
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]
        self.lines = text.split("\n")

    def line(self, at: int) -> int:
        """The 1-based line of offset `at`."""
        return bisect.bisect_left(self._newlines, at) + 1

    def skip_space(self, newlines: bool = True) -> None:
        text, n = self.text, len(self.text)
        while self.at < n and (text[self.at] in " \t" or (newlines and text[self.at] == "\n")):
            self.at += 1

    def token(self, ends: str = " \t\n") -> str:
        """The next word up to a space or newline, or one of `ends` (spaces before it skipped)."""
        self.skip_space()
        start, text, n = self.at, self.text, len(self.text)
        while self.at < n and text[self.at] not in ends:
            self.at += 1
        return text[start:self.at]

    def expect(self, word: str) -> None:
        if self.token() != word:
            raise _NotAJaxpr

    def jaxpr(self, parent: int | str | None, depth: int) -> None:
        """`{ lambda CONSTS ; INPUTS . let EQNS in OUTS }`, its equations appended with `parent`."""
        if depth > _MAX_DEPTH:
            raise _NotAJaxpr
        self.expect("{")
        self.expect("lambda")
        env: dict[str, tuple[Aval, Source]] = {}  # a name -> its aval and where its value comes from
        word = self.token()
        while word != ";":  # constants
            self.bind(env, word, Source(None, len(env)))
            word = self.token()
        word = self.token()
        while True:  # inputs, the last ending in `.`
            if word == ".":
                break
            if word.endswith("."):
                self.bind(env, word[:-1], Source(None, len(env)))
                break
            self.bind(env, word, Source(None, len(env)))
            word = self.token()
        self.expect("let")
        while True:
            self.skip_space()
            if self._at_in():
                break
            self.equation(env, parent, depth)
            self.skip_space(newlines=False)
            if self.text.startswith(";", self.at):
                self.at += 1
        self.at += 2
        self.skip_space()
        if self.text[self.at] == "(":
            self.balanced()
        else:
            self.token()
        self.expect("}")

    def _continued(self, column: int) -> bool:
        """Whether the line after the newline at the cursor goes on with an equation that starts at `column`:
        JAX wraps a long equation's operands onto lines indented deeper than it (`1.0:f32[]` under a `jit`)."""
        start = self.at + 1
        end = self.text.find("\n", start)
        line = self.text[start:] if end < 0 else self.text[start:end]
        return bool(line.strip()) and len(line) - len(line.lstrip(" ")) > column

    def _at_in(self) -> bool:
        """Whether the cursor is at the keyword that ends a jaxpr's equations (`in (`), not at a variable `in`."""
        return self.text.startswith("in (", self.at) or self.text.startswith("in(", self.at)

    def bind(self, env: dict, binder: str, source: Source | None) -> Aval:
        name, colon, aval_text = binder.partition(":")
        aval = _aval(aval_text) if colon else None
        if not name or aval is None:
            raise _NotAJaxpr
        env[name] = (aval, source)
        return aval

    def equation(self, env: dict, parent: int | str | None, depth: int) -> None:
        first = self.line(self.at)
        outputs, out_names = [], []
        self.skip_space()
        column = self.at - (self.text.rfind("\n", 0, self.at) + 1)
        word = self.token()
        while word != "=":
            if not word or word == "}":
                raise _NotAJaxpr
            name = word.partition(":")[0]
            outputs.append(self.bind({}, word, None))
            out_names.append(name)
            word = self.token()
        self.skip_space()
        start, text = self.at, self.text
        while self.at < len(text) and (text[self.at].isalnum() or text[self.at] in "_-"):  # `scatter-add`
            self.at += 1
        primitive = text[start:self.at]
        if not primitive:
            raise _NotAJaxpr
        own = len(self.eqns)
        self.eqns.append(None)  # its id before those of the equations inside its params: print order
        if self._param[-1] is not None:
            self.held_in[own] = self._param[-1]
        params = self.params(own, depth) if text.startswith("[", self.at) else {}
        for key in _PRINTED_ONLY.get(primitive, ()):
            params.pop(key, None)
        params = _with_left_out(primitive, params, outputs)
        inputs, sources, known = [], [], True
        while True:
            self.skip_space(newlines=False)
            if text.startswith("\n", self.at) and self._continued(column):
                self.at += 1
                continue
            if self.at >= len(text) or text[self.at] in "\n;}":
                break
            if self._at_in():
                break
            arg = self.token(" \t\n;")  # a jaxpr printed on one line ends an equation at `;`: `exp a; c = ...`
            value, colon, aval_text = arg.rpartition(":")
            if colon and value and _aval(aval_text) is not None:
                inputs.append(Literal(value, _aval(aval_text).dtype))
                sources.append(None)
            elif arg in env:
                inputs.append(env[arg][0])
                sources.append(env[arg][1])
            else:
                known = False
        for k, (name, aval) in enumerate(zip(out_names, outputs)):
            if name != "_":
                env[name] = (aval, Source(own, k))
        last = max(first, self.line(max(self.at - 1, 0)))
        printed = read_equation(self.lines, (first, last, column), primitive, len(outputs), len(inputs))
        self.eqns[own] = EqnFact(id=own, parent=parent, primitive=primitive, params=params,
                                 inputs=tuple(inputs) if known else (), outputs=tuple(outputs),
                                 jaxpr_lines=(first, last), sources=tuple(sources) if known else (),
                                 binders=printed.binders,
                                 operand_names=printed.operand_names if known else (), bodies=printed.bodies,
                                 printed_params=printed.printed_params, body_binders=printed.body_binders,
                                 printed_end=printed.printed_end)

    def params(self, own: int, depth: int) -> dict:
        """`[key=value ...]`, each plain value kept (a sub-jaxpr as the record's placeholder)."""
        self.at += 1
        out = {}
        text = self.text
        while True:
            self.skip_space()
            if text[self.at] == "]":
                self.at += 1
                return out
            equals = self.at
            while text[equals] not in "=\n]":
                equals += 1
            if text[equals] != "=":
                raise _NotAJaxpr
            key = text[self.at:equals].strip()
            self.at = equals + 1
            self._param.append(key)
            value = self.value(own, depth, key != "name")
            self._param.pop()
            if value is not _UNPLAIN:
                out[key] = value

    def value(self, own: int, depth: int, may_name_jaxpr: bool = True):
        """One param value: a sub-jaxpr, a tuple or list of values, or a word; `_UNPLAIN` for anything else."""
        text = self.text
        self.skip_space()
        c = text[self.at]
        if c == "{":
            self.jaxpr(own, depth + 1)
            return JAXPR_PLACEHOLDER
        if c in "([":
            if depth > _MAX_DEPTH:
                raise _NotAJaxpr
            close = _OPENERS[c]
            self.at += 1
            items, plain = [], True
            while True:
                self.skip_space()
                if text[self.at] == close:
                    self.at += 1
                    break
                if text[self.at] == ",":
                    self.at += 1
                    continue
                item = self.value(own, depth + 1, may_name_jaxpr)
                plain = plain and item is not _UNPLAIN
                items.append(item)
            return items if plain else _UNPLAIN
        start = self.at
        while self.at < len(text) and text[self.at] not in _STOP:
            if text[self.at] in "'\"":
                self.quoted()
                continue
            self.at += 1
        word = text[start:self.at]
        if self.at < len(text) and text[self.at] in "(<[{" :  # a call or object printed with its fields
            self.balanced()
            return _UNPLAIN
        if not word:
            raise _NotAJaxpr
        if len(word) >= 2 and word[0] in "'\"" and word[-1] == word[0] and word.count(word[0]) == 2:
            return word[1:-1]  # a quoted string: its text (a mesh axis, 'x')
        if may_name_jaxpr and word in self.hoisted:  # a hoisted sub-jaxpr, called by this equation
            self.hoisted[word].append(own)
            self.hoisted_as.setdefault((word, own), self._param[-1])
            return JAXPR_PLACEHOLDER
        return _plain(word)

    def quoted(self) -> None:
        quote = self.text[self.at]
        end = self.text.find(quote, self.at + 1)
        if end == -1:
            raise _NotAJaxpr
        self.at = end + 1

    def balanced(self) -> None:
        """Skip one bracketed stretch (any of `()[]{}<>` nested, quotes read whole), in one pass."""
        text, stack = self.text, []
        while True:
            c = text[self.at]
            if c in "'\"":
                self.quoted()
                continue
            if c in _OPENERS:
                stack.append(_OPENERS[c])
            elif stack and c == stack[-1]:
                stack.pop()
                if not stack:
                    self.at += 1
                    return
            elif c in ")]}>" and c != ">":
                raise _NotAJaxpr
            self.at += 1
