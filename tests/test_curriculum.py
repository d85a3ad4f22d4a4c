"""The curriculum: one numbering (the course's chapters), the gym's own chapters named, and drills in path order."""
from __future__ import annotations

import pytest

from dumpgym import drills

from dumpgym.site import curriculum

PATH_ORDER = ["shapes", "decoder", "decisions", "loops", "backward", "partitioner", "buffers", "layouts", "units",
              "fusions", "kernels", "cost"]
# Kinds asked only of a program beside its compile with one change: the pool of the programs alone has none.
PAIRED_KINDS = ["diff"]


def test_the_page_shows_the_kinds_the_pool_names_in_path_order(pool):
    kinds = curriculum.drill_kinds(pool)
    assert [k.name for k in kinds] == PATH_ORDER
    assert {k.name for k in kinds} == {item["drill"] for item in pool["items"]}
    assert all(k.title and k.aim for k in kinds)


def test_a_kind_the_path_does_not_name_comes_after_the_path_in_the_pools_order(pool):
    extra = [{"name": "newcomer", "number": "00", "title": "t", "aim": "a"}, {"name": "other", "number": "99",
                                                                             "title": "u", "aim": "b"}]
    kinds = curriculum.drill_kinds({**pool, "kinds": extra + pool["kinds"]})
    assert [k.name for k in kinds] == PATH_ORDER + ["newcomer", "other"]


def test_no_drill_kind_may_take_the_x_rays_number():
    assert drills.XRAY_SECTION not in {k.number for k in drills.kinds().values()}
    with pytest.raises(ValueError, match="the x-ray's"):
        drills.drill("newcomer", number=drills.XRAY_SECTION, title="t", aim="a")


def test_the_steps_are_numbered_from_one_and_name_the_guide_chapter_they_serve():
    assert [ch.step for ch in curriculum.PATH] == list(range(1, len(curriculum.PATH) + 1))
    assert [ch.id for ch in curriculum.PATH] == ["02", "03", "04", "loops", "backward", "sharding", "buffers", "tpu",
                                                 "12"]
    assert [ch.number for ch in curriculum.PATH if ch.number] == ["02", "03", "04", "12"]
    assert curriculum.PATH[0].label == "step 1, jaxprs on sight (guide chapter 02)"
    assert curriculum.PATH[3].label == "step 4, loops"
    assert curriculum.PATH[-1].label == f"step {len(curriculum.PATH)}, the bar (guide chapter 12)"
    assert not any(ch.title[:1].isdigit() for ch in curriculum.PATH)


def test_every_step_opens_with_a_lesson_and_each_teaching_step_names_its_worked_example():
    """A lesson in our words for every step; an example from the drill the step sets its first target in."""
    for ch in curriculum.PATH:
        assert ch.lesson and 1 <= ch.lesson.count(". ") + 1 <= 4, ch.id
    for ch in curriculum.PATH[:-1]:  # the bar teaches nothing new
        assert ch.example is not None and ch.example.drill == ch.targets[0].drill, ch.id


def test_every_path_target_names_a_registered_drill_kind():
    kinds = set(drills.kinds())
    keys = [ch.key(t) for ch in curriculum.PATH for t in ch.targets]
    assert len(keys) == len(set(keys))
    assert keys[:2] == ["02/shapes/10", "03/decoder/10"] and "loops/loops/10" in keys
    assert {t.drill for ch in curriculum.PATH for t in ch.targets} <= kinds


def test_the_bar_asks_for_every_registered_drill_kind_in_path_order():
    bar = curriculum.PATH[-1]
    assert bar.number == "12"
    assert [t.drill for t in bar.targets] == PATH_ORDER + PAIRED_KINDS
    assert sorted(t.drill for t in bar.targets) == sorted(drills.kinds())
    assert {t.streak for t in bar.targets} == {2 * curriculum.FLUENCY}


def test_the_tpu_chapter_sets_streaks_in_the_tpu_kinds():
    tpu = next(ch for ch in curriculum.PATH if ch.id == "tpu")
    assert [(t.drill, t.streak) for t in tpu.targets] == [
        ("layouts", curriculum.FLUENCY), ("units", curriculum.FLUENCY), ("fusions", curriculum.FLUENCY)]


def test_a_fresh_profile_starts_at_the_first_target_whose_drill_the_page_shows(pool):
    kinds = curriculum.drill_kinds(pool)
    chapter, target, kind = curriculum.first_step(kinds)
    assert (chapter.id, target.drill, kind.name) == ("02", "shapes", "shapes")
    without_shapes = [k for k in kinds if k.name != "shapes"]
    chapter, target, kind = curriculum.first_step(without_shapes)
    assert (chapter.id, target.drill) == ("03", "decoder")
    assert curriculum.first_step([]) is None
