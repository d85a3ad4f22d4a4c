"""An added program's drill items are kept beside its record and made again only when the record or the
drills' code changes: `drills`, `serve` and `build` read a big model's items instead of building them."""
import json
import os
import stat

import jax
import jax.numpy as jnp
import pytest

import dumpgym
from dumpgym import drills
from dumpgym.drills import _stored, build_pool
from dumpgym.site import load_inputs


def _mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


@pytest.fixture
def folder(tmp_path):
    f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)  # noqa: E731
    dumpgym.add(_mlp, f32(8, 16), f32(16, 32), f32(32, 4), slug="mine", corpus=tmp_path / "c", compiled=True)
    return tmp_path / "c"


def _mine(pool):
    return [i for i in pool["items"] if i["program"] == "mine"]


def test_the_items_are_kept_beside_the_record_and_read_back(folder, monkeypatch):
    _, first = load_inputs(folder)
    stored = json.loads((folder / "mine.drills.json").read_text())
    assert stored["schema"] == _stored.SCHEMA and stored["items"] == _mine(first) and _mine(first)
    # The second load reads them: making them again would fail here.
    real = drills.items_for
    monkeypatch.setattr(drills, "items_for", lambda p, s=None: pytest.fail("made again") if p.slug == "mine"
                        else real(p, s))
    _, second = load_inputs(folder)
    assert second["items"] == first["items"]


def test_a_changed_record_or_code_makes_them_again(folder, monkeypatch):
    load_inputs(folder)
    path = folder / "mine.json"
    record = json.loads(path.read_text())
    record["title"] = "renamed"  # items quote no title, but a changed record is a changed record
    path.write_text(json.dumps(record))
    made = []
    real = drills.items_for
    monkeypatch.setattr(drills, "items_for", lambda p, s=None: made.append(p.slug) or real(p, s))
    load_inputs(folder)
    assert made.count("mine") == 1
    monkeypatch.setattr(_stored, "code_digest", lambda: "another-release")
    load_inputs(folder)
    assert made.count("mine") == 2


def test_stored_items_equal_freshly_made_ones(folder):
    _, pool = load_inputs(folder)  # stores
    _, again = load_inputs(folder)  # reads
    corpus, _ = load_inputs(folder)
    assert _mine(again) == _mine(build_pool(corpus))  # made with nothing stored


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a read-only mode")
def test_a_read_only_folder_still_gives_the_items(folder):
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        _, pool = load_inputs(folder)
    finally:
        folder.chmod(stat.S_IRWXU)
    assert _mine(pool) and not (folder / "mine.drills.json").exists()


def test_a_damaged_items_file_is_made_again(folder):
    load_inputs(folder)
    (folder / "mine.drills.json").write_text("{not json")
    _, pool = load_inputs(folder)
    assert _mine(pool) and json.loads((folder / "mine.drills.json").read_text())["items"] == _mine(pool)


def test_remove_takes_the_items_with_the_record(folder):
    from dumpgym import usercorpus

    load_inputs(folder)
    assert (folder / "mine.drills.json").exists()
    usercorpus.remove("mine", folder)
    assert not (folder / "mine.drills.json").exists() and not (folder / "mine.json").exists()
