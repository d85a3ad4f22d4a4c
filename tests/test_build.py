"""The site folder: written whole and swapped in, replacing only an earlier build as it was, deleting nothing else."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumpgym import build, cli, site
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
    rename, failed = Path.rename, []

    def failing_rename(self, target):
        if Path(target) == user_build and not failed:  # the new build's move into place
            failed.append(self)
            raise OSError("disk trouble")
        return rename(self, target)

    before = snapshot(user_build.parent)
    monkeypatch.setattr(Path, "rename", failing_rename)
    with pytest.raises(OSError, match="disk trouble"):
        build.build_site(user_build, *larger)
    assert snapshot(user_build.parent) == before


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
    code = ("import sys, tempfile; from dumpgym import build, site; c, d = site.load_inputs(); "
            "build.build_site(tempfile.mkdtemp(), c, d); assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
