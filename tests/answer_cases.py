"""One table of answer forms and responses, graded by Python's `dumpgym.drills.answer.check` in
test_drills_answer.py and by the page's static/answer.js in a browser test: the two must agree.

Each case is (answer JSON, response, whether it is right, whether it is readable at all)."""

_AVAL = {"form": "typed", "spelling": "aval", "value": "bf16[64,512]",
         "misread": {"bf16[512,64]": {"reason": "the axes are the other way round", "rule": "swapped-axes"}}}
_INT = {"form": "typed", "spelling": "int", "value": "1024"}
_TILE = {"form": "typed", "spelling": "tile", "value": "(8,128)(2,1)"}
_SHAPE = {"form": "typed", "spelling": "shape", "value": "[8,32]"}
_SCALAR = {"form": "typed", "spelling": "aval", "value": "f32[]"}
_DTYPE = {"form": "typed", "spelling": "dtype", "value": "f8_e4m3fn"}
_LINES = {"form": "lines", "lines": [3, 5, 9], "explain": {"4": "line 4 is a reshape XLA makes a bitcast"}}
_AXES = {"form": "axes", "label": "lhs", "dims": [8, 64, 128], "axes": [2],
         "misread": {"1": {"reason": "that is the rhs's contracted axis", "rule": "wrong-operand"}}}
_LINE = {"form": "line", "line": 7, "accepted": [7, 8], "explain": {"6": "the broadcast before it"}}
_CHOICE = {"form": "choice", "options": ["a", "b", "c"], "index": 1, "reasons": ["ra", "", "rc"],
           "rules": ["x", "", "y"]}

CASES = [
    (_AVAL, "bf16[64,512]", True, True),
    (_AVAL, "  bfloat16[64, 512] ", True, True),
    (_AVAL, "bf16 (64, 512)", True, True),
    (_AVAL, "bf16(64,512)", True, True),
    (_AVAL, "BF16[64 x 512]", True, True),
    (_AVAL, "bf16[512,64]", False, True),
    (_AVAL, "f32[64,512]", False, True),
    (_AVAL, "bf16[64,512", False, False),
    (_AVAL, "[64,512]", False, False),
    (_AVAL, "half[64,512]", False, False),
    (_AVAL, "", False, False),
    (_AVAL, "tensor<64x512xbf16>", True, True),  # the listings' own notation: StableHLO's
    (_AVAL, "bf16[64,512]{1,0:T(8,128)(2,1)}", True, True),  # and a compiled one's, its layout aside
    (_AVAL, "tensor<512x64xbf16>", False, True),
    (_AVAL, "tensor<64x512xhalf>", False, False),
    (_SCALAR, "tensor<f32>", True, True),
    (_SCALAR, "f32[]", True, True),
    (_SCALAR, "float32", True, True),
    (_SCALAR, "f32 ()", True, True),
    (_SCALAR, "f32[1]", False, True),
    (_INT, "1024", True, True),
    (_INT, "1,024", True, True),
    (_INT, "1_024", True, True),
    (_INT, " 1 024 ", True, True),
    (_INT, "01024", True, True),
    (_INT, "1,02,4", False, False),
    (_INT, "1024.0", False, False),
    (_INT, "512", False, True),
    (_TILE, "T(8,128)(2,1)", True, True),
    (_TILE, "(8, 128)(2, 1)", True, True),
    (_TILE, "(8,128)", False, True),
    (_TILE, "8x128", False, True),
    (_TILE, "T(8,128", False, False),
    (_SHAPE, "(8, 32)", True, True),
    (_SHAPE, "8x32", True, True),
    (_SHAPE, "8 32", True, True),
    (_SHAPE, "[8,32,]", True, True),
    (_SHAPE, "[32,8]", False, True),
    (_SHAPE, "8;32", False, False),
    (_SHAPE, "f32[8,32]", True, True),  # a shape asked, typed as the listing prints the type
    (_SHAPE, "f32[8,32]{1,0}", True, True),
    (_SHAPE, "tensor<8x32xf32>", True, True),
    (_SHAPE, "tensor<32x8xf32>", False, True),
    (_SHAPE, "q32[8,32]", False, False),
    (_DTYPE, "float8_e4m3fn", True, True),
    (_DTYPE, "f8_e4m3fn", True, True),
    (_DTYPE, "f8_e5m2", False, True),
    (_LINES, [3, 5, 9], True, True),
    (_LINES, [9, 3, 5], True, True),
    (_LINES, [3, 5], False, True),
    (_LINES, [3, 4, 5, 9], False, True),
    (_LINES, [], False, False),
    (_AXES, [2], True, True),
    (_AXES, [1], False, True),
    (_AXES, [1, 2], False, True),
    (_AXES, [], False, True),
    (_AXES, [3], False, False),
    (_LINE, 7, True, True),
    (_LINE, 8, True, True),
    (_LINE, 6, False, True),
    (_CHOICE, 1, True, True),
    (_CHOICE, 0, False, True),
    (_CHOICE, 3, False, False),
]

# Only ASCII digits are digits: Python's str.isdigit and `\d` take others (Arabic-Indic, fullwidth), the page's do not.
CASES += [
    (_INT, "١٠٢٤", False, False),
    (_SHAPE, "(８, 32)", False, False),
    (_DTYPE, "f٨_e4m3fn", False, False),
]
