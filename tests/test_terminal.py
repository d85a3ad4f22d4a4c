"""Terminal output: control characters from file names and exception messages arrive escaped, one line each."""
import os
import subprocess
import sys
from pathlib import Path

from dumpgym.terminal import printable

SRC = str(Path(__file__).parents[1] / "src")


def test_controls_bidi_overrides_and_surrogates_are_escaped():
    assert printable("evil/\x1b[31mRED\u202e.py") == "evil/\\x1b[31mRED\\u202e.py"
    assert printable("a\nb\r\x00\x7f\x9b") == "a\\x0ab\\x0d\\x00\\x7f\\x9b"
    assert printable("caf\udce9 \u2066x\u2069") == "caf\\udce9 \\u2066x\\u2069"


def test_ordinary_text_is_unchanged():
    text = "f32[64,128] · 3–6 lines · مرحبا · 日本語 · tab-free"
    assert printable(text) == text


def test_a_file_name_with_escapes_reaches_the_terminal_escaped(tmp_path):
    evil = tmp_path / "evil\x1b[31mRED\x1b]0;owned\x07.py"
    evil.write_text("def f(x)\n    return x\n")  # a syntax error, so the error line names the file
    result = subprocess.run([sys.executable, "-m", "dumpgym", "add", f"{evil}:f", "--arg", "f32[3]",
                             "--corpus", str(tmp_path / "corpus")], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": SRC})
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "evil\\x1b[31mRED\\x1b]0;owned\\x07.py" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
