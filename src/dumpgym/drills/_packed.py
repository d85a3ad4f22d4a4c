"""How the drill pool is printed and kept: each program's items packed, their words in shared tables.

The items of one program say the same things many times over: a compile's note in every item of that
layer, a wrong option's reason around each option's own words, "Line 2, `slice`: %slice.3 (HLO line 78)
does it." for each row of a line set. So a program's items are packed (`pack`):

- every string is written once, in the program's `strings` (the most used first, so their indices take
  the fewest digits), or where it is said when it is said once; an item names it by a *reference*;
- a sentence of a shape many strings share is cut into that *shape*, the words around what varies,
  kept once in `shapes`, and its parts: what varies (a number, an `%hlo.name`, a `code` span, an
  array type) and the options and typed answers of its item it quotes (`Not “A”: ...; so the answer
  is “B”.` is one shape for every option of every such item);
- a context many items show is written once, in `contexts`;
- defaults are left out: `eqn` null, `weight` 1, unset optional fields, each card's `drill/program/`,
  each item's `drill` and `program` (the program's runs of items name them).

A reference is an index into `strings`, a string (itself), or a list `[shape, part, ...]` (each part an
index or a string): the shape's words with the parts between them. The printed pool (`dumpgym drills`)
shares the programs' tables too: its `strings` and `shapes` hold each distinct one once, and each
program's `strings` and `shapes` list the indices of its own in them (`write`); a kept file holds one
program's tables as text (`kept_text`), so that it reads alone. docs/drills.md gives the format whole.

`unpack` gives back exactly the items `Item.to_json` made, key for key in the same order, and `read`
the pool `pool_of` gives from what `write` printed (a test round-trips the whole built-in pool).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Callable

# The item's fields in the order `Item.to_json` writes them, each with its key in a packed item and how it
# is packed: "ref" a string as a reference (maybe cut into a shape and parts), "name" a string as a
# reference never cut (a layer, a step, an option, a rule), "card" the card's parts after `drill/program/`,
# "raw" as it is; "weight" is left out when 1, `drill` is named by the item's run, and `answer`,
# `context` and `facts` have their own packing.
_FIELDS = (("drill", "d", "ref"), ("card", "c", "card"), ("eqn", "e", "raw"), ("layer", "l", "name"),
           ("step", "s", "name"), ("skill", "k", "name"), ("primitive", "p", "name"), ("weight", "w", "weight"),
           ("question", "q", "ref"), ("answer", "a", "answer"), ("context", "x", "context"),
           ("feedback", "f", "ref"), ("jaxpr_lines", "j", "raw"), ("facts", "t", "raw"))
_OPTIONAL = {"eqn", "step", "skill", "primitive", "feedback", "jaxpr_lines", "facts"}

# Each answer form's fields after its name, in `to_json`'s order; a packed answer is the list
# `[form, field, ...]`, a field the form left out written as null (or not at all, at the end). "ref" and
# "name" a string (as above), "refs" and "names" a list of them, "map" a dict of strings, "misread" a dict
# of `{"reason", "rule"}` (packed as a list of `[key, reason, rule]`), "raw" as it is.
_FORMS = {
    "choice": (("options", "names"), ("index", "raw"), ("reasons", "refs"), ("rules", "names")),
    "line": (("line", "raw"), ("accepted", "raw"), ("explain", "map")),
    "lines": (("lines", "raw"), ("explain", "map")),
    "typed": (("spelling", "name"), ("value", "name"), ("accepted", "names"), ("misread", "misread")),
    "axes": (("label", "ref"), ("dims", "raw"), ("axes", "raw"), ("misread", "misread")),
}
_BLOCK_FLAGS = ("cut", "strip", "numbered")
_MIN_QUOTED = 4  # an option shorter than this is not cut out of the item's other strings
_KEEP_WHOLE = 8  # a string said this often in one program is kept whole: cutting it saves less than its parts cost
_SHAPED = 2  # a shape fewer strings than this have is no saving: those strings are kept whole
_MIN_CUT = 6  # a part shorter than this is not cut around its numbers and names
# What varies in a sentence of one shape: an HLO name, a number, a `code` span, an array type.
_VARYING = re.compile(r"(%[\w.-]+|\d[\d,.]*|`[^`]*`|[a-z0-9]+\[[\d,]*\](?:\{[^}]*\})?)")


def pack(items: list[dict]) -> dict:
    """One program's items (`Item.to_json`'s, all of one program) as the pool prints them."""
    slug = items[0]["program"] if items else ""
    if any(item["program"] != slug for item in items):
        raise ValueError("packed items are one program's")
    said: list[list[str]] = [[] for _ in items]  # each item's strings, in one walk; its card's parts apart
    parts_said: list[str] = []
    for item, mine in zip(items, said):
        _walk(item, mine.append, parts_said.append)
    # A string said often is kept whole; only the others are cut into a shape and parts.
    kept = {s for s, n in Counter(s for mine in said for s in mine).items() if n >= _KEEP_WHOLE}
    cuts = [[cut(s) for s in mine] for cut, mine in
            zip((_splitter(item, kept) for item in items), said)]  # each string's shape and parts, in walk order
    shaped = Counter(shape for row in cuts for shape, _ in row)
    # A shape fewer strings than `_SHAPED` have is no saving: those strings are kept whole, wherever said.
    kept.update(s for row, mine in zip(cuts, said) for (shape, _), s in zip(row, mine) if shaped[shape] < _SHAPED)
    cuts = [[((s,), []) if s in kept else cut for cut, s in zip(row, mine)] for row, mine in zip(cuts, said)]
    every_part, every_shape = list(parts_said), []
    for row in cuts:  # counted, so that the most used get the smallest indices
        for shape, parts in row:
            if parts:
                every_part += parts
                every_shape.append(shape)
            else:
                every_part += shape  # the string itself, whole
    used, shaped = Counter(every_part), Counter(every_shape)
    strings: list[str] = []
    for s, n in sorted(used.items(), key=lambda kv: (-kv[1], kv[0])):
        if n > 1 and len(json.dumps(s, ensure_ascii=False)) > len(str(len(strings))):  # else the part itself is shorter
            strings.append(s)
    index = {s: i for i, s in enumerate(strings)}
    shapes = [list(shape) for shape, _ in sorted(shaped.items(), key=lambda kv: (-kv[1], kv[0]))]
    shape_index = {tuple(shape): i for i, shape in enumerate(shapes)}

    def whole(s: str):
        return index.get(s, s)  # a part said once is written where it is said

    def ref_of(row):
        walked = iter(row)  # `_walk` visits an item's strings in the same order every time

        def ref(s: str):
            shape, parts = next(walked)
            return [shape_index[shape], *map(whole, parts)] if parts else whole(shape[0])
        return ref
    packed = [_walk(item, ref_of(row), whole) for item, row in zip(items, cuts)]
    # Items of one kind and program often show the same context: each such one is written once.
    shown: Counter = Counter(json.dumps(p["x"]) for p in packed)
    contexts = [json.loads(k) for k, n in sorted(shown.items(), key=lambda kv: (-kv[1], kv[0])) if n > 1]
    where = {json.dumps(x): i for i, x in enumerate(contexts)}
    runs: list[list] = []
    for item, p in zip(items, packed):
        p["x"] = where.get(json.dumps(p["x"]), p["x"])
        if not runs or runs[-1][0] != item["drill"]:
            runs.append([item["drill"], []])
        runs[-1][1].append(p)
    return {"program": slug, "strings": strings, "shapes": shapes, "contexts": contexts, "items": runs}


def unpack(packed: dict) -> list[dict]:
    """The items of one packed program, exactly as `Item.to_json` wrote them."""
    strings, shapes, contexts, slug = packed["strings"], packed["shapes"], packed["contexts"], packed["program"]

    def part(ref) -> str:
        return strings[ref] if type(ref) is int else ref

    def text(ref) -> str:
        kind = type(ref)
        if kind is int:
            return strings[ref]
        if kind is str:
            return ref
        shape = shapes[ref[0]]
        out = [shape[0]]
        for p, words in zip(ref[1:], shape[1:]):
            out += (strings[p] if type(p) is int else p, words)
        return "".join(out)
    out = []
    for drill, run in packed["items"]:
        for p in run:
            item = {"drill": drill, "program": slug}
            for name, key, how in _FIELDS[1:]:
                value = p.get(key)
                if how == "card":
                    item["card"] = "/".join((drill, slug, *map(part, value if isinstance(value, list) else [value])))
                elif how == "weight":
                    item["weight"] = 1.0 if value is None else value
                elif name == "eqn":
                    item["eqn"] = value
                elif value is None:
                    if name not in _OPTIONAL:
                        raise ValueError(f"a packed {drill} item of {slug} has no {name!r}")
                elif how in ("ref", "name"):
                    item[name] = text(value)
                elif how == "answer":
                    item[name] = _unpack_answer(value, text)
                elif how == "context":
                    item[name] = [_unpack_block(b, text) for b in (contexts[value] if isinstance(value, int) else value)]
                elif name == "facts":
                    item[name] = _unpack_facts(value, text)
                else:
                    item[name] = value
            out.append(item)
    return out


def _walk(item: dict, ref: Callable[[str], object], whole: Callable[[str], object]) -> dict:
    """The packed item, each string through `ref` (counting, or naming by index), each part of its card
    through `whole` (a part is never cut); without its `drill`, which its run of items names."""
    out = {}
    for name, key, how in _FIELDS:
        value = item.get(name)
        if value is None or name == "drill":
            continue
        if how == "ref":
            out[key] = ref(value)
        elif how == "name":
            out[key] = whole(value)
        elif how == "card":
            head = f"{item['drill']}/{item['program']}/"
            if not value.startswith(head):
                raise ValueError(f"card {value!r} does not start with {head!r}")
            parts = [whole(part) for part in value[len(head):].split("/")]
            out[key] = parts[0] if len(parts) == 1 else parts
        elif how == "weight":
            if value != 1.0:
                out[key] = value
        elif how == "answer":
            out[key] = _pack_answer(value, ref, whole)
        elif how == "context":
            out[key] = [_pack_block(b, ref) for b in value]
        elif name == "facts":
            if value:
                out[key] = _pack_facts(value, whole)
        else:
            out[key] = value
    return out


def _pack_facts(facts: dict, whole):
    """Facts as `[keys, value, ...]`, `keys` the reference to their names joined by spaces (each kind's
    items name the same few), the values as they are; as the dict itself if a name holds a space."""
    if any(" " in k or not k for k in facts):
        return facts
    return [whole(" ".join(facts)), *facts.values()]


def _unpack_facts(packed, text) -> dict:
    if isinstance(packed, dict):
        return packed
    return dict(zip(text(packed[0]).split(" "), packed[1:]))


def _pack_answer(answer: dict, ref, whole) -> list:
    form = answer["form"]
    out: list = [form]
    for name, how in _FORMS[form]:
        value = answer.get(name)
        if value is None:
            out.append(None)
        elif how == "ref":
            out.append(ref(value))
        elif how == "name":
            out.append(whole(value))
        elif how == "refs":
            out.append([ref(v) for v in value])
        elif how == "names":
            out.append([whole(v) for v in value])
        elif how == "map":
            out.append({k: ref(v) for k, v in value.items()})
        elif how == "misread":
            out.append([[whole(k), ref(m["reason"]), whole(m["rule"])] for k, m in value.items()])
        else:
            out.append(value)
    while out[-1] is None:
        out.pop()
    return out


def _unpack_answer(packed: list, text) -> dict:
    form, *values = packed
    out = {"form": form}
    for (name, how), value in zip(_FORMS[form], values + [None] * (len(_FORMS[form]) - len(values))):
        if value is None:
            continue
        if how in ("ref", "name"):
            out[name] = text(value)
        elif how in ("refs", "names"):
            out[name] = [text(v) for v in value]
        elif how == "map":
            out[name] = {k: text(v) for k, v in value.items()}
        elif how == "misread":
            out[name] = {text(k): {"reason": text(reason), "rule": text(rule)} for k, reason, rule in value}
        else:
            out[name] = value
    return out


def _pack_block(block: dict, ref):
    """A text block as its reference; lines of a listing as `{"n": [layer, first, last]}`, with its flags as
    a fourth number when any is set (1 `cut`, 2 `strip`, 4 `numbered`, added), and `"p"` the other program
    whose listing it reads, where it names one."""
    if "text" in block:
        return ref(block["text"])
    flags = sum(1 << n for n, k in enumerate(_BLOCK_FLAGS) if block.get(k))
    return {"n": [ref(block["layer"]), *block["lines"], *([flags] if flags else [])],
            **({"p": ref(block["program"])} if "program" in block else {})}


def _unpack_block(packed, text) -> dict:
    if not isinstance(packed, dict):
        return {"text": text(packed)}
    layer, first, last, *flags = packed["n"]
    return {"layer": text(layer), "lines": [first, last],
            **{k: True for n, k in enumerate(_BLOCK_FLAGS) if flags and flags[0] & 1 << n},
            **({"program": text(packed["p"])} if "p" in packed else {})}


def _splitter(item: dict, kept: set[str]) -> Callable[[str], tuple[tuple[str, ...], list[str]]]:
    """How the item's strings are cut into a shape and its parts: around each of its options and typed
    answers it quotes (longest first), and around what varies in a longer stretch (`_VARYING`), so that
    the words around them are one shape that every sentence alike shares; a string in `kept` is whole."""
    answer = item["answer"]
    quoted = [*answer.get("options", ()), *(answer.get("value", ()) and [answer["value"]]),
              *answer.get("misread", {})] if answer["form"] in ("choice", "typed") else []
    quoted = sorted({q for q in quoted if len(q) >= _MIN_QUOTED}, key=lambda q: (-len(q), q))

    memo: dict[str, tuple] = {}  # an item says some strings many times (a line set's "Part of line 2..." rows)

    def cut(s: str) -> tuple[tuple[str, ...], list[str]]:
        if s in kept:
            return (s,), []
        if s not in memo:
            memo[s] = _cut(s)
        return memo[s]

    def _cut(s: str) -> tuple[tuple[str, ...], list[str]]:
        pieces = [(s, False)]  # (text, whether it is a part the shape leaves a hole for)
        for q in (q for q in quoted if q in s):
            pieces = [p for piece in pieces for p in (_around(piece[0], q) if not piece[1] else [piece])]
        shape, parts = [""], []
        for text, hole in pieces:
            for n, piece in enumerate([text] if hole or len(text) < _MIN_CUT else _VARYING.split(text)):
                if hole or n % 2:
                    parts.append(piece)
                    shape.append("")
                else:
                    shape[-1] += piece
        if shape == ["", ""]:  # a string that is all one part is that part
            return tuple(parts), []
        return tuple(shape), parts
    return cut


def _around(s: str, q: str) -> list[tuple[str, bool]]:
    """`s` cut before and after each `q` it holds, each `q` a hole."""
    out = []
    for n, piece in enumerate(s.split(q)):
        if n:
            out.append((q, True))
        if piece:
            out.append((piece, False))
    return out


# --- the kept text of one program, and the printed pool -----------------------------------------------

def kept_text(items: list[dict]) -> bytes:
    """One program's packed items as a kept file holds them: a line with its tables (`program`, `strings`,
    `shapes`), then the rest of the packed program (`"contexts":...,"items":...}`), so that `write` reads
    only the tables and copies the rest."""
    packed = pack(items)
    head = {k: packed[k] for k in ("program", "strings", "shapes")}
    rest = _compact({k: packed[k] for k in ("contexts", "items")})
    return _compact(head) + b"\n" + rest[1:]


def kept_items(text: bytes | memoryview) -> list[dict]:
    """The items of one program's kept text (`kept_text`)."""
    head, rest = _halves(text)
    return unpack({**json.loads(head), **json.loads(b"{" + bytes(rest))})


def write(head: dict, texts: list, skipped: list[dict], out, together: list[dict] = ()) -> None:
    """Print the pool: `head` (`schema`, `kinds`), the tables every program's kept text (`kept_text`)
    shares, each program with its own tables as indices into them and the rest of it copied, and the
    `skipped` and `together` lists when there are any; compact JSON, a line per program."""
    strings: dict[str, int] = {}
    shapes: dict[tuple, int] = {}
    heads, rests = [], []
    for text in texts:
        raw, rest = _halves(text)
        one = json.loads(raw)
        heads.append(one)
        rests.append(rest)
        for s in one["strings"]:
            strings[s] = strings.get(s, 0) + 1
        for shape in one["shapes"]:
            shapes[tuple(shape)] = shapes.get(tuple(shape), 0) + 1
    # The strings and shapes most programs share first, so their indices take the fewest digits.
    string_at = {s: i for i, s in enumerate(sorted(strings, key=lambda s: (-strings[s], s)))}
    shape_at = {sh: i for i, sh in enumerate(sorted(shapes, key=lambda sh: (-shapes[sh], sh)))}
    out.write(_compact(head)[:-1] + b',"strings":' + _compact(list(string_at)) + b',\n"shapes":'
              + _compact([list(sh) for sh in shape_at]) + b',\n"programs":[')
    for n, (one, rest) in enumerate(zip(heads, rests)):
        local = {"program": one["program"], "strings": [string_at[s] for s in one["strings"]],
                 "shapes": [shape_at[tuple(sh)] for sh in one["shapes"]]}
        out.write((b",\n" if n else b"\n") + _compact(local)[:-1] + b",")
        out.write(rest)
    out.write(b"\n]")
    if skipped:
        out.write(b',\n"skipped":' + _compact(skipped))
    if together:
        out.write(b',\n"together":' + _compact(list(together)))
    out.write(b"}")


def read(printed: dict) -> dict:
    """The pool (`schema`, `kinds`, `items`, and `skipped` and `together` when any) from what `write` printed, parsed."""
    strings, shapes = printed["strings"], printed["shapes"]
    items = [item for one in printed["programs"] for item in unpack(
        {**one, "strings": [strings[i] for i in one["strings"]], "shapes": [shapes[i] for i in one["shapes"]]})]
    pool = {"schema": printed["schema"], "kinds": printed["kinds"], "items": items}
    for extra in ("skipped", "together"):
        if extra in printed:
            pool[extra] = printed[extra]
    return pool


def _compact(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _halves(text) -> tuple[bytes, memoryview]:
    """A kept text's tables line and the rest (a JSON string holds no raw newline: the first is the cut)."""
    view = memoryview(text)
    cut = bytes(view).find(b"\n")
    if cut < 0:
        raise ValueError("kept drill items have no tables line")
    return bytes(view[:cut]), view[cut + 1:]
