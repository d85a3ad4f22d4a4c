"""The curriculum: drill kinds as the pool names them, numbered around the x-ray, and a path over them."""
from __future__ import annotations

import pytest

from dumpgym import curriculum, drills


def test_the_page_shows_the_kinds_the_pool_names_in_gym_order(pool):
    kinds = curriculum.drill_kinds(pool)
    assert [(k.name, k.number) for k in kinds][:8] == [("decoder", "01"), ("shapes", "02"), ("decisions", "03"),
                                                       ("fusions", "05"), ("partitioner", "06"), ("loops", "07"),
                                                       ("backward", "08"), ("buffers", "09")]
    assert [(k.name, k.number) for k in kinds if k.number >= "10"] == [("layouts", "10"), ("units", "11")]
    assert {k.name for k in kinds} == {item["drill"] for item in pool["items"]}
    assert all(k.title and k.aim for k in kinds)


def test_no_drill_kind_may_take_the_x_rays_number():
    assert curriculum.XRAY_SECTION not in {k.number for k in drills.kinds().values()}
    with pytest.raises(ValueError, match="the x-ray's"):
        drills.drill("newcomer", number=curriculum.XRAY_SECTION, title="t", aim="a")


def test_every_path_target_names_a_registered_drill_kind():
    kinds = set(drills.kinds())
    keys = [ch.key(t) for ch in curriculum.PATH for t in ch.targets]
    assert len(keys) == len(set(keys))
    assert [ch.number for ch in curriculum.PATH] == ["02", "03", "04", "05", "06", "07", "08", "11", "12"]
    assert {t.drill for ch in curriculum.PATH for t in ch.targets} <= kinds


def test_the_bar_asks_for_every_registered_drill_kind_fusions_included():
    bar = curriculum.PATH[-1]
    assert bar.number == "12"
    assert [t.drill for t in bar.targets] == sorted(drills.kinds(), key=lambda name: drills.kinds()[name].number)
    assert "fusions" in {t.drill for t in bar.targets}
    assert {t.streak for t in bar.targets} == {2 * curriculum.FLUENCY}


def test_the_tpu_chapter_sets_streaks_in_the_tpu_kinds():
    tpu = next(ch for ch in curriculum.PATH if ch.number == "11")
    assert [(t.drill, t.streak) for t in tpu.targets] == [
        ("layouts", curriculum.FLUENCY), ("units", curriculum.FLUENCY), ("fusions", curriculum.FLUENCY)]
