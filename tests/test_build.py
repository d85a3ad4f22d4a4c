"""The site folder: written whole and swapped in, replacing only an earlier build as it was, deleting nothing else."""
from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from dumpgym import cli

from dumpgym.site import build

from dumpgym.site import files as site
from dumpgym.drills import build_pool
from dumpgym.errors import BuildFolderError

ROOT = Path(__file__).resolve().parents[1]


def _inputs(corpus, slugs):
    data = copy.deepcopy(corpus)
    data["programs"] = [p for p in data["programs"] if p["slug"] in slugs]
    return data, build_pool(data)


@pytest.fixture(scope="module")
def small(corpus):
    """Two programs and their drill pool."""
    return _inputs(corpus, ("mlp", "layernorm"))


@pytest.fixture(scope="module")
def larger(corpus):
    """Three programs: building these, then `small`, leaves one program's files stale."""
    return _inputs(corpus, ("mlp", "layernorm", "softmax"))


@pytest.fixture(scope="module")
def files(small):
    return site.render_site(*small)


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder`, links not followed: a file by its sha256, a link by its target."""
    out = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(root, name)
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def written(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def user_build(tmp_path, small):
    """An earlier build, at tmp_path/site."""
    out = tmp_path / "site"
    build.build_site(out, *small)
    return out


def test_a_new_folder_gets_what_render_site_makes_and_a_manifest_of_it(tmp_path, small, files):
    out = tmp_path / "new" / "site"
    build.build_site(out, *small)
    got = written(out)
    marker = json.loads(got.pop(build.MARKER))
    assert got == files
    assert marker == {
        "schema": "dumpgym.site-manifest/1",
        "files": {rel: {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
                  for rel, body in sorted(files.items())},
    }
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["site"]


def test_an_empty_folder_is_built_into(tmp_path, small, files):
    out = tmp_path / "site"
    out.mkdir()
    build.build_site(out, *small)
    got = written(out)
    assert got.pop(build.MARKER) == build.manifest(files) and got == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_rebuild_replaces_an_unchanged_build_leaving_no_stale_file(tmp_path, small, larger, files):
    out = tmp_path / "site"
    build.build_site(out, *larger)
    assert (out / "data" / "programs" / "softmax.json").is_file()
    build.build_site(out, *small)
    got = written(out)
    assert got.pop(build.MARKER) == build.manifest(files)
    assert got == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_a_file_the_user_added_to_a_build_is_refused_by_name_and_nothing_is_deleted(user_build, small):
    (user_build / "src").mkdir()
    (user_build / "src" / "main.py").write_text("print('mine')\n")
    before = snapshot(user_build.parent)
    with pytest.raises(BuildFolderError, match=r"holds 'src/main.py', which dumpgym build did not write"):
        build.build_site(user_build, *small)
    assert snapshot(user_build.parent) == before


def test_an_empty_folder_the_user_added_to_a_build_is_refused(user_build, small):
    (user_build / "drafts").mkdir()
    with pytest.raises(BuildFolderError, match=r"'drafts'"):
        build.build_site(user_build, *small)
    assert (user_build / "drafts").is_dir()


def test_a_build_file_the_user_edited_is_refused_by_name_even_at_the_same_size(user_build, small):
    page = user_build / "index.html"
    body = page.read_bytes()
    page.write_bytes(body.replace(b"<html", b"<HTML", 1))  # same size, other bytes
    before = snapshot(user_build.parent)
    with pytest.raises(BuildFolderError, match=r"holds 'index.html', changed since dumpgym build wrote it"):
        build.build_site(user_build, *small)
    assert snapshot(user_build.parent) == before


def test_a_build_missing_a_file_it_wrote_is_refused_by_name(user_build, small):
    (user_build / "corpus.json").unlink()
    before = snapshot(user_build.parent)
    with pytest.raises(BuildFolderError, match=r"lacks 'corpus.json'"):
        build.build_site(user_build, *small)
    assert snapshot(user_build.parent) == before


def test_an_old_marker_without_a_manifest_is_foreign(tmp_path, small, files):
    out = tmp_path / "site"
    out.mkdir()
    (out / build.MARKER).write_text("written by dumpgym build\n")
    (out / "index.html").write_bytes(files["index.html"])
    before = snapshot(tmp_path)
    with pytest.raises(BuildFolderError, match=r"holds '\.dumpgym-site' with no dumpgym build manifest"):
        build.build_site(out, *small)
    assert snapshot(tmp_path) == before


def test_a_users_own_dot_old_folder_survives_a_rebuild_untouched(tmp_path, small):
    mine = tmp_path / ".site.old"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine\n")
    before = snapshot(mine)
    build.build_site(tmp_path / "site", *small)
    build.build_site(tmp_path / "site", *small)
    assert snapshot(mine) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site.old", "site"]


def test_a_symlink_out_is_built_through_and_stays_a_link(tmp_path, small, files):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "site"
    link.symlink_to("real", target_is_directory=True)
    build.build_site(link, *small)
    build.build_site(link, *small)  # over the earlier build in the target
    assert link.is_symlink() and os.readlink(link) == "real"
    got = written(real)
    assert got.pop(build.MARKER) == build.manifest(files) and got == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real", "site"]


def test_a_symlink_to_a_foreign_folder_is_refused_untouched(tmp_path, small):
    real = tmp_path / "real"
    real.mkdir()
    (real / "notes.txt").write_text("keep me\n")
    (tmp_path / "site").symlink_to("real", target_is_directory=True)
    before = snapshot(tmp_path)
    with pytest.raises(BuildFolderError, match=r"holds 'notes.txt'"):
        build.build_site(tmp_path / "site", *small)
    assert snapshot(tmp_path) == before


def test_a_non_empty_foreign_folder_is_refused_untouched(tmp_path, small):
    mine = tmp_path / "home"
    (mine / "src").mkdir(parents=True)
    (mine / "src" / "main.py").write_text("print('mine')\n")
    (mine / "notes.txt").write_text("keep me\n")
    before = snapshot(tmp_path)
    with pytest.raises(BuildFolderError, match=r"holds 'notes.txt', which dumpgym build did not write"):
        build.build_site(mine, *small)
    assert snapshot(tmp_path) == before


def test_a_file_at_out_is_refused(tmp_path, small):
    (tmp_path / "site").write_text("mine\n")
    with pytest.raises(BuildFolderError, match="is not a folder"):
        build.build_site(tmp_path / "site", *small)
    assert (tmp_path / "site").read_text() == "mine\n"


def test_a_file_added_during_the_build_keeps_the_old_build_in_place(user_build, small, monkeypatch):
    def render_while_the_user_writes(corpus, drills):
        (user_build / "late.txt").write_text("mine\n")
        return site.render_site(corpus, drills)

    monkeypatch.setattr(build, "render_site", render_while_the_user_writes)
    before = snapshot(user_build.parent)
    with pytest.raises(BuildFolderError, match="'late.txt'"):
        build.build_site(user_build, *small)
    # The first check passed before the file appeared, so this is the second check's refusal.
    assert snapshot(user_build.parent) == {**before, "site/late.txt": hashlib.sha256(b"mine\n").hexdigest()}


def test_a_failed_swap_leaves_the_old_build_whole(user_build, larger, monkeypatch):
    def failing_exchange(a, b):
        raise OSError("disk trouble")

    before = snapshot(user_build.parent)
    monkeypatch.setattr(build, "_exchange", failing_exchange)
    with pytest.raises(OSError, match="disk trouble"):
        build.build_site(user_build, *larger)
    assert snapshot(user_build.parent) == before


def test_without_an_exchange_a_failed_move_in_leaves_the_old_build_whole(user_build, larger, monkeypatch):
    rename, failed = Path.rename, []

    def failing_rename(self, target):
        if Path(target) == user_build and not failed:  # the new build's move into place
            failed.append(self)
            raise OSError("disk trouble")
        return rename(self, target)

    before = snapshot(user_build.parent)
    monkeypatch.setattr(build, "_exchange", lambda a, b: False)  # a system without renameat2's exchange
    monkeypatch.setattr(Path, "rename", failing_rename)
    with pytest.raises(OSError, match="disk trouble"):
        build.build_site(user_build, *larger)
    assert snapshot(user_build.parent) == before
    monkeypatch.setattr(Path, "rename", rename)
    build.build_site(user_build, *larger)  # and the two renames do replace it when nothing fails
    assert sorted(p.name for p in user_build.parent.iterdir()) == ["site"]


def test_the_swap_is_one_exchange_of_directory_entries(user_build, larger, monkeypatch):
    calls = []
    real = build._exchange
    monkeypatch.setattr(build, "_exchange", lambda a, b: calls.append((a, b)) or real(a, b))
    monkeypatch.setattr(Path, "rename", lambda self, target: pytest.fail(f"renamed {self} to {target}"))
    build.build_site(user_build, *larger)
    assert len(calls) == 1 and calls[0][1] == user_build and calls[0][0].name.startswith(".site.new-")
    assert sorted(p.name for p in user_build.parent.iterdir()) == ["site"]


def test_a_disk_full_names_the_file(tmp_path, small, monkeypatch):
    write = Path.write_bytes

    def full(self, data):
        if self.name == "index.html":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(BuildFolderError, match=r"cannot write .*/site/index\.html .*: No space left on device"):
        build.build_site(tmp_path / "site", *small)
    assert list(tmp_path.iterdir()) == []


POLLER = """
import sys, time
path, stop = sys.argv[1], sys.argv[2]
reads = missing = 0
for _ in range(200_000):  # bounded: 1,000 s at most
    try:
        with open(path, 'rb') as f:
            f.read(64)
        reads += 1
    except FileNotFoundError:
        missing += 1
    try:
        open(stop).close()
        break
    except FileNotFoundError:
        time.sleep(0.005)
print(reads, missing)
"""


@contextmanager
def polling(path: Path, tmp_path: Path):
    """A process reading `path` every 5 ms while the block runs; yields a list that gets (reads, misses)."""
    stop = tmp_path / "stop-polling"
    proc = subprocess.Popen([sys.executable, "-c", POLLER, str(path), str(stop)], stdout=subprocess.PIPE, text=True)
    result = []
    try:
        yield result
    finally:
        stop.touch()
        out, _ = proc.communicate(timeout=60)
        result.extend(int(n) for n in out.split())


def test_a_reader_never_misses_index_html_through_20_rebuilds(tmp_path, small, files, monkeypatch):
    monkeypatch.setattr(build, "render_site", lambda corpus, drills: dict(files))  # rendered once
    out = tmp_path / "site"
    build.build_site(out, *small)
    with polling(out / "index.html", tmp_path) as seen:
        for _ in range(20):
            build.build_site(out, *small)
    reads, missing = seen
    assert reads > 0 and missing == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "stop-polling"]


def test_builds_killed_at_random_leave_the_old_build_and_the_next_one_cleans_up(tmp_path):
    out, empty = tmp_path / "site", tmp_path / "no-added-programs"
    build_cmd = [sys.executable, "-m", "dumpgym", "build", "--out", str(out), "--corpus", str(empty)]
    subprocess.run(build_cmd, check=True, capture_output=True, timeout=300)
    rng = random.Random(28)
    with polling(out / "index.html", tmp_path) as seen:
        for _ in range(10):
            proc = subprocess.Popen(build_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Rendering comes first and risks nothing: the kill lands at random once the build starts
            # writing its folder beside `site`, through the writing, the swap and the old build's removal.
            for _ in range(12_000):
                if proc.poll() is not None or any(p.name.startswith(".site.new-") for p in tmp_path.iterdir()):
                    break
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.5))
            proc.kill()
            proc.wait(timeout=60)
            assert (out / "index.html").is_file()
    reads, missing = seen
    assert reads > 0 and missing == 0
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site."))
    print("left by the killed builds:", left)
    result = subprocess.run(build_cmd, check=True, capture_output=True, text=True, timeout=300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "stop-polling"]
    lines = result.stdout.splitlines()
    if left:
        assert len(lines) == 2 and lines[0].startswith(f"removed what {len(left)} interrupted build(s) left")
        assert lines[0].split(": ", 1)[1].split() == left
    else:
        assert len(lines) == 1
    assert written(out).keys() == {rel for rel in json.loads((out / build.MARKER).read_text())["files"]} | {build.MARKER}


def test_leftovers_that_are_not_a_builds_own_are_kept(tmp_path, small):
    out = tmp_path / "site"
    build.build_site(out, *small)
    theirs = tmp_path / ".site.new-abcdefgh"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine\n")
    killed = tmp_path / ".site.new-12345678"  # a build killed after writing its marker and one file
    killed.mkdir()
    (killed / build.MARKER).write_bytes((out / build.MARKER).read_bytes())
    (killed / "index.html").write_bytes(b"<!doctype html> half")
    assert build.build_site(out, *small) == [killed]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site.new-abcdefgh", "site"]
    assert (theirs / "notes.txt").read_text() == "mine\n"


def test_the_cli_refuses_a_foreign_folder_in_one_line_and_changes_no_byte(user_build, capsys, tmp_path):
    (user_build / "src").mkdir()
    (user_build / "src" / "main.py").write_text("print('mine')\n")
    before = snapshot(user_build.parent)
    assert cli.main(["build", "--out", str(user_build), "--corpus", str(tmp_path / "no-added-programs")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dumpgym: error: ") and "'src/main.py'" in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    assert snapshot(user_build.parent) == before


def test_the_build_does_not_import_jax():
    code = ("import sys, tempfile; from dumpgym.site import build, files as site; c, d = site.load_inputs(); "
            "build.build_site(tempfile.mkdtemp(), c, d); assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
