"""The collector held off for a whole add (`gcpause.collector_off`) is turned back on without a walk of
everything made while it was off, and without keeping any of it from the collector for good."""
import gc
import weakref

from dumpgym.gcpause import collector_off, keep_alive_now, kept_alive


class _Node:
    pass


def test_collector_off_turns_it_back_on_with_what_it_made_counted_old():
    assert gc.isenabled()
    with collector_off():
        assert not gc.isenabled()
        kept = [[i] for i in range(200_000)]  # far past the young generation's threshold
        cycle = _Node()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
    assert gc.isenabled()
    # Plain gc.enable() would leave the young count at some 200,000: the next allocation would walk it all.
    assert gc.get_count()[0] < gc.get_threshold()[0]
    assert any(o is kept for o in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0  # nothing left frozen: the cycle made inside is still the collector's
    assert gone() is not None
    gc.collect()
    assert gone() is None


def test_collector_off_leaves_what_someone_else_froze_frozen():
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_off():
            _ = [[i] for i in range(10_000)]
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_what_a_block_keeps_alive_is_given_back_to_the_collector_at_its_end():
    assert gc.get_freeze_count() == 0
    with kept_alive():
        cycle = _Node()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        keep_alive_now()
        assert gc.get_freeze_count() > 0  # frozen while the block runs: its walks skip it
        del cycle
        gc.collect()
        assert gone() is not None
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_a_block_freezes_nothing_where_someone_else_froze_first():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with kept_alive():
            _ = [[i] for i in range(10_000)]
            keep_alive_now()
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_keep_alive_now_outside_a_block_freezes_nothing():
    keep_alive_now()
    assert gc.get_freeze_count() == 0


def test_an_in_process_corpus_build_leaves_nothing_frozen():
    from dumpgym.corpus.pipeline import build_corpus
    from dumpgym.programs import builtin_program

    build_corpus([builtin_program("softmax"), builtin_program("layernorm")], compiled=False, jobs=1)
    assert gc.get_freeze_count() == 0
