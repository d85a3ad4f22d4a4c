"""Pygments lexers for the dumps the gym teaches: printed jaxprs, StableHLO text and compiled HLO."""
from __future__ import annotations

import re

from pygments.lexer import RegexLexer, bygroups, default, include
from pygments.token import (
    Comment, Error, Keyword, Name, Number, Operator, Punctuation, String, Whitespace, _TokenType,
)

__all__ = ["HloLexer", "JaxprLexer", "StableHloLexer"]

# --- shared ----------------------------------------------------------------

# A double-quoted string with backslash escapes, on one line: all three dumps print strings so.
_STRING = r'"(?:[^"\\\n]|\\.)*"'


def _aside(opening: str, closing: str, to_line_end: bool = False) -> list:
    """The state for an aside the page dims (`Comment.Special`), such as a source location: it nests
    `opening` and `closing` brackets and takes quoted strings whole (a bracket in one does not count);
    with `to_line_end`, an aside left open also ends where its line does."""
    stops = opening + closing + '"' + ("\\n" if to_line_end else "")
    rules = [
        (_STRING, Comment.Special),
        (re.escape(opening), Comment.Special, "#push"),
        (re.escape(closing), Comment.Special, "#pop"),
        (f"[^{stops}]+", Comment.Special),
    ]
    return rules + [(r"\n", Whitespace, "#pop")] if to_line_end else rules


def _bygroups(*tokens):
    """Pygments' `bygroups` of token types, which says its types (`tokens`): the joined loop reads each group
    from the alternation's own match instead of matching the rule again for Pygments' callback."""
    callback = bygroups(*tokens)
    callback.tokens = tokens
    return callback


class _OneMatchPerToken(RegexLexer):
    """Pygments' `RegexLexer` loop, with each state's rules joined into one alternation, tried once per
    token instead of once per rule (a compiled HLO listing tries about a dozen rules per token: lexing
    was most of a cold server's first renders). Python's `re` takes the first alternative that matches
    at a position, as the loop takes the first rule, and its groups are the rule's own: the tokens are the
    same (a test compares them with `RegexLexer.get_tokens_unprocessed` on every built-in listing)."""

    def get_tokens_unprocessed(self, text, stack=("root",)):
        return self._scan(text, stack, True)

    def pairs(self, text):
        """(token type, text) pairs: `get_tokens_unprocessed`'s tokens without their positions (a highlighted
        listing needs none)."""
        return self._scan(text, ("root",), False)

    def _scan(self, text, stack, positions: bool):
        joined = _joined(type(self))
        pos = 0
        statestack = list(stack)
        match, rules = joined[statestack[-1]]
        while True:
            m = match(text, pos)
            if m is None:  # no rule matches here: as RegexLexer does
                if pos >= len(text):
                    break
                if text[pos] == "\n":
                    statestack = ["root"]
                    match, rules = joined["root"]
                    yield (pos, Whitespace, "\n") if positions else (Whitespace, "\n")
                else:
                    yield (pos, Error, text[pos]) if positions else (Error, text[pos])
                pos += 1
                continue
            rexmatch, action, groups, new_state = rules[m.lastindex]
            if groups is not None:  # `_bygroups`: each non-empty group, as Pygments' callback yields them
                for group, ttype in groups:
                    value = m.group(group)
                    if value:
                        yield (m.start(group), ttype, value) if positions else (ttype, value)
            elif type(action) is _TokenType:
                yield (pos, action, m.group()) if positions else (action, m.group())
            elif action is not None:  # another callback reads the rule's own match: match the rule alone
                for token in action(self, rexmatch(text, pos)):
                    yield token if positions else token[1:]
            pos = m.end()
            if new_state is not None:
                _transition(statestack, new_state)
                match, rules = joined[statestack[-1]]


def _transition(statestack: list[str], new_state) -> None:
    """RegexLexer's change of state after a rule, in place."""
    if isinstance(new_state, tuple):
        for state in new_state:
            if state == "#pop":
                if len(statestack) > 1:
                    statestack.pop()
            elif state == "#push":
                statestack.append(statestack[-1])
            else:
                statestack.append(state)
    elif isinstance(new_state, int):
        if abs(new_state) >= len(statestack):
            del statestack[1:]
        else:
            del statestack[new_state:]
    elif new_state == "#push":
        statestack.append(statestack[-1])
    else:
        raise AssertionError(f"wrong state def: {new_state!r}")


def _joined(cls) -> dict:
    """Each state of `cls` (processed by Pygments) as one compiled alternation's match, and its rules by the
    number of the empty group that ends each (`Match.lastindex`, the group closed last): (the rule's own
    match, action, the groups of a `_bygroups` action as (group number in the alternation, token type),
    new state). The marking group ends each rule rather than wrapping it: an alternative that starts with
    a literal or a class is then skipped at a glance by `re` where the text starts otherwise."""
    if "_joined_states" not in cls.__dict__:
        states = {}
        for state, rules in cls._tokens.items():
            parts, by_group, group = [], {}, 0
            for rexmatch, action, new_state in rules:
                pattern = rexmatch.__self__
                parts.append(f"(?:{pattern.pattern})()")
                tokens = getattr(action, "tokens", None)
                groups = None
                if tokens is not None and all(t is None or type(t) is _TokenType for t in tokens):
                    groups = tuple((group + i, t) for i, t in enumerate(tokens, start=1) if t is not None)
                group += pattern.groups + 1
                by_group[group] = (rexmatch, action, groups, new_state)
            rules_by_group = [by_group.get(n) for n in range(group + 1)]
            states[state] = (re.compile("|".join(parts), cls.flags).match, rules_by_group)
        cls._joined_states = states
    return cls._joined_states


# --- jaxpr -----------------------------------------------------------------

# An aval as `ShapedArray.str_short` prints it: dtype, optional memory space,
# dims (a dim may carry `@axis`, `@(x,y)`, or a symbolic `b + 1`), then the
# optional `{V:x, U:y}` varying/unreduced suffix; refs wrap one in `Ref{...}`.
_SHAPED = r"[a-z]\w*(?:<\w+>)?\[[^\]\n]*\](?:\{[A-Z]:[^}\n]*\})?"
_AVAL = rf"(?:{_SHAPED}|[A-Z]\w*(?:<[^>\n]*>)?\{{{_SHAPED}\}}|[A-Z]\w*)"
_IDENT = r"[A-Za-z_]\w*"
_FLOAT = r"-?(?:\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+|inf|nan)"
# Python's str() of a complex scalar: `1j`, `-2.5j`, `(1+2j)`, `(nan+nanj)`.
_COMPLEX = r"\([^()\s]*j\)|-?(?:\d+(?:\.\d*)?(?:e[+-]?\d+)?|inf|nan)j"
_DTYPE_WORDS = r"(?:bfloat16|float8_\w+|float\d+|u?int\d+|complex\d+|bool)\b"


def _literal(value: str, token):
    """A rule for a literal operand `value:aval`, such as `128.0:f32[]`."""
    return rf"({value})(:)({_AVAL})", _bygroups(token, Punctuation, Keyword.Type)


class JaxprLexer(_OneMatchPerToken):
    """Lexer for jaxprs as JAX 0.10 prints them with `str(jax.make_jaxpr(f)(*args))`."""

    name = "Jaxpr"
    aliases = ["jaxpr"]
    filenames = ["*.jaxpr"]
    url = "https://docs.jax.dev/en/latest/jaxpr.html"

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            # A jaxpr used twice is printed once, first: `let _f = { lambda ... } in`.
            (rf"^(let)(\s+)({_IDENT})(\s*)(=)", _bygroups(Keyword, Whitespace, Name.Label, Whitespace, Operator)),
            (r"(?<=\} )in\b", Keyword),
            include("body"),
            (r"[{}\]]", Punctuation),
        ],
        "jaxpr": [
            (r"\}", Punctuation, "#pop"),
            include("body"),
        ],
        "body": [
            (r"\s+", Whitespace),
            (r"\{", Punctuation, "jaxpr"),
            (r"lambda\b", Keyword),
            # Variables are named a, b, ..., z, ba, ...: `in` and `let` are real
            # names in long jaxprs, so the keywords are known by what surrounds them.
            (r"(?<=\. )let\b", Keyword),
            (r"in(?= \()", Keyword),
            _literal(r"True|False", Keyword.Constant),
            _literal(_COMPLEX, Number),
            _literal(_FLOAT, Number.Float),
            _literal(r"-?\d+", Number.Integer),
            _literal(r"\[\.\.\.\]", Number),
            (rf"({_IDENT})(:)({_AVAL})", _bygroups(Name.Variable, Punctuation, Keyword.Type)),
            (r"(=)(\s+)([A-Za-z_][\w.\-]*)", _bygroups(Operator, Whitespace, Name.Function)),
            (r"<-|\+=", Operator),
            # Refs print as `x[...] <- v`: an index has no `=`, params always do.
            (rf"({_IDENT})(\[)(?=[^\]=\n]*\])", _bygroups(Name.Variable, Punctuation), "index"),
            (r"[A-Za-z_][\w.\-]*(?=\[)", Name.Function),
            (r"\[", Punctuation, "params"),
            (_IDENT, Name.Variable),
            (r"[(),;.:]", Punctuation),
        ],
        "index": [
            (r"\]", Punctuation, "#pop"),
            (r"\s+", Whitespace),
            (r"-?\d+", Number.Integer),
            (_IDENT, Name.Variable),
            (r"[^\]\s\w]+", Punctuation),
        ],
        "params": [
            (r"\s+", Whitespace),
            (r"\]", Punctuation, "#pop"),
            # `jaxpr=_f` names a hoisted jaxpr, the same label its `let _f =` carries.
            (rf"(\w*jaxprs?)(=)(?!None\b)({_IDENT})(?=[\s\]])", _bygroups(Name.Attribute, Operator, Name.Label)),
            (rf"({_IDENT})(=)", _bygroups(Name.Attribute, Operator), "value"),
            include("atoms"),
            (r"[(\[{<]", Punctuation, "nested"),
            (r"[)}>]", Punctuation),
        ],
        # A param value is whatever str() of a Python object gives, so it ends at
        # the first whitespace or `]` outside brackets and may hold anything inside.
        "value": [
            (r"\{(?=\s*lambda\b)", Punctuation, ("#pop", "jaxpr")),
            (r"[(\[{<]", Punctuation, "nested"),
            include("atoms"),
            default("#pop"),
        ],
        "nested": [
            (r"\s+", Whitespace),
            (r"\{(?=\s*lambda\b)", Punctuation, "jaxpr"),
            (r"[(\[{<]", Punctuation, "#push"),
            (r"[)\]}>]", Punctuation, "#pop"),
            (rf"({_IDENT})(=)", _bygroups(Name, Operator)),
            include("atoms"),
        ],
        "atoms": [
            (r"'(?:[^'\\\n]|\\.)*'", String.Single),
            (_STRING, String.Double),
            # `(?!\w)`: `nan_to_num` is a name, not the number `nan` and a tail.
            (r"0x[0-9a-fA-FX]+(?!\w)", Number.Hex),
            (rf"(?:{_COMPLEX})(?!\w)", Number),
            (rf"{_FLOAT}(?!\w)", Number.Float),
            (r"-?\d+(?!\w)", Number.Integer),
            (r"(?:True|False|None)\b", Keyword.Constant),
            (_DTYPE_WORDS, Keyword.Type),
            (rf"{_IDENT}(?:\.{_IDENT})*", Name),
            (r"->|[<>=!]=", Operator),
            (r"\w+", Name),
            (r"[^\s\w()\[\]{}<>]", Punctuation),
        ],
    }


# --- StableHLO -------------------------------------------------------------

# MLIR types nest (`tensor<8xcomplex<f32>>`); three levels cover what JAX emits.
_ANGLE = r"<(?:[^<>\n]|<(?:[^<>\n]|<[^<>\n]*>)*>)*>"
_ELEMENT = r"(?:bf16|tf32|f\d+(?:E\w+)?|[su]?i\d+|ui\d+|index|none)\b"
_MLIR_NAME = r"[A-Za-z_][\w$.\-]*"


class StableHloLexer(_OneMatchPerToken):
    """Lexer for StableHLO modules as `jax.jit(f).lower(*args).as_text()` prints them."""

    name = "StableHLO"
    aliases = ["stablehlo", "mlir-stablehlo"]
    filenames = ["*.mlir"]
    url = "https://openxla.org/stablehlo/spec"

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"//.*?$", Comment.Single),
            # Source locations (`as_text(debug_info=True)`) are dimmed: they say
            # where an op came from, not what it does.
            (r"#loc\w*(?:\s*=(?=\s*loc\())?", Comment.Special),
            (r"loc\(", Comment.Special, "loc"),
            (r"(?:func\.func|func\.return|module|attributes|return|public|private|nested)\b", Keyword),
            (rf"(?:tensor|vector|memref|tuple|complex){_ANGLE}", Keyword.Type),
            (rf"![\w.]+(?:{_ANGLE})?", Keyword.Type),
            (_ELEMENT, Keyword.Type),
            (r"%[\w$.\-]+(?:#\d+)?", Name.Variable),
            (rf"[\^@]{_MLIR_NAME}", Name.Label),
            (rf"@{_STRING}", Name.Label),
            (r"#[\w$.]+", Name.Constant),
            # The generic form names its op in quotes: `"stablehlo.case"(%1) ({`.
            (r'"[A-Za-z_]\w*(?:\.\w+)+"(?=\()', Name.Function),
            (_STRING, String.Double),
            (rf"({_MLIR_NAME})(\s*)(=)(?!=)", _bygroups(Name.Attribute, Whitespace, Operator)),
            (r"[A-Za-z_]\w*(?:\.\w+)+", Name.Function),
            (r"call\b", Name.Function),
            (r"(?:true|false|unit)\b", Keyword.Constant),
            # Convolution layouts: `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`.
            (r"[bfio](?=[,\]])", Name.Constant),
            (r"[A-Z][A-Z0-9_]*\b", Name.Constant),
            # A unit attribute is a bare key: `<{..., use_global_device_ids}>`.
            (r"[a-z_][\w$.]*(?=\s*[,}])", Name.Attribute),
            (r"[a-z_][\w$]*", Keyword),
            (r"[A-Za-z_][\w$]*", Name),
            (r"0x[0-9A-Fa-f]+", Number.Hex),
            (r"[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)", Number.Float),
            (r"[-+]?\d+", Number.Integer),
            (r"->|=", Operator),
            (r"\.\.\.|[(){}\[\]<>,:;?*|.]", Punctuation),
        ],
        "loc": _aside("(", ")"),
    }


# --- compiled HLO ----------------------------------------------------------

# A shape: element type, dims (`<=` marks a dynamic bound), then the layout in
# braces, which on accelerators also carries tiling and memory space (`{1,0:T(8,128)S(1)}`).
_HLO_SHAPE = r"(?:pred|token|opaque|bf16|tf32|[fsuc]\d+(?:e\d+m\d+\w*)?)\[[^\]\n]*\](?:\{[^{}\n]*\})?"
_HLO_NAME = r"%[\w.\-]+"
# Attributes whose value names a computation (`calls=%fused_computation.3`).
_HLO_CALLS = r"calls|to_apply|condition|body|select|scatter|comparator"


class HloLexer(_OneMatchPerToken):
    """Lexer for compiled HLO modules as `jax.jit(f).lower(*args).compile().as_text()` prints them."""

    name = "HLO"
    aliases = ["hlo", "xla-hlo"]
    filenames = ["*.hlo"]
    url = "https://openxla.org/xla/operation_semantics"

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"/\*.*?\*/", Comment.Multiline),
            (r"^(HloModule)(\s+)([\w.\-]+)", _bygroups(Keyword, Whitespace, Name.Label)),
            # A computation header starts its line: `%fused_computation (param_0: f32[8]) -> f32[8] {`.
            (rf"^(ENTRY)(\s+)({_HLO_NAME})", _bygroups(Keyword, Whitespace, Name.Label)),
            (rf"^{_HLO_NAME}(?=\s*\()", Name.Label),
            (r"ROOT\b", Keyword),
            # Metadata says where an instruction came from (its op_name is the jaxpr's name
            # stack), not what it does: dimmed, like source locations in StableHLO.
            (r"metadata=\{", Comment.Special, "metadata"),
            (rf"({_HLO_CALLS})(=)({_HLO_NAME})", _bygroups(Name.Attribute, Operator, Name.Label)),
            (r"(\w*computations)(=)(\{)", _bygroups(Name.Attribute, Operator, Punctuation), "computations"),
            (_HLO_SHAPE, Keyword.Type),
            (_HLO_NAME, Name.Variable),
            (r"([a-z][\w\-]*)(\()", _bygroups(Name.Function, Punctuation)),
            (r"([A-Za-z_][\w\-]*)(=)", _bygroups(Name.Attribute, Operator)),
            (_STRING, String.Double),
            (r"(?:true|false)\b", Keyword.Constant),
            # Fusion kinds (`kLoop`), comparison directions (`LT`), enum values (`API_VERSION_TYPED_FFI`).
            (r"k[A-Z]\w*\b|[A-Z][A-Z0-9_]*\b", Name.Constant),
            (r"-?(?:inf|nan)\b", Number.Float),
            (r"0x[0-9A-Fa-f]+", Number.Hex),
            (r"-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+)", Number.Float),
            # Window sizes and paddings (`3x3`, `1_1x1_1`, `0_0_0x0_1_1`) and plain integers.
            (r"-?\d+(?:_-?\d+)*(?:x-?\d+(?:_-?\d+)*)*\b", Number.Integer),
            (r"[A-Za-z_](?:[\w.]|-(?!>))*", Name),
            (r"->|<=|=", Operator),
            (r"[(){}\[\],:;<>*/.|!?@#$&+~^'-]", Punctuation),
        ],
        "metadata": _aside("{", "}", to_line_end=True),
        "computations": [
            (r"\s+", Whitespace),
            (_HLO_NAME, Name.Label),
            (r",", Punctuation),
            (r"\}", Punctuation, "#pop"),
            default("#pop"),
        ],
    }
