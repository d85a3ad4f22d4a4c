"""The built-in programs are found from their modules: each module's `ORDER` places it, nothing lists them."""
import importlib
from pathlib import Path

import pytest

import dumpgym.programs
from dumpgym.programs import SLUGS, discover


def test_slugs_are_the_program_modules_sorted_by_their_imported_order(programs):
    folder = Path(dumpgym.programs.__file__).parent
    modules = [importlib.import_module(f"dumpgym.programs.{p.stem}") for p in folder.glob("[a-z]*.py")]
    assert tuple(m.PROGRAM.slug for m in sorted(modules, key=lambda m: m.ORDER)) == SLUGS
    assert all(m.PROGRAM is programs[m.PROGRAM.slug] for m in modules)


def test_the_discovered_order_is_the_committed_corpus_order(corpus):
    assert tuple(p["slug"] for p in corpus["programs"]) == SLUGS


def test_a_new_module_takes_its_place_by_its_order_alone(tmp_path):
    for name, order in [("first", 10), ("third", 30), ("two_and_a_half", 25), ("_helper", None)]:
        (tmp_path / f"{name}.py").write_text("PROGRAM = None\n" + ("" if order is None else f"ORDER = {order}\n"))
    assert discover(tmp_path) == ("first", "two-and-a-half", "third")


@pytest.mark.parametrize("text, error", [
    ("PROGRAM = None\n", "late.py has no `ORDER = <int>`"),
    ("ORDER = '20'\n", "late.py has no `ORDER = <int>`"),
    ("ORDER = 10\n", "early.py and late.py both have ORDER = 10"),
])
def test_a_module_without_a_distinct_integer_order_is_refused(tmp_path, text, error):
    (tmp_path / "early.py").write_text("ORDER = 10\n")
    (tmp_path / "late.py").write_text(text)
    with pytest.raises(ImportError, match=error):
        discover(tmp_path)
