"""The `needs_tpu` / `needs_gpu` markers: skipped where the extra is missing, failed in one line under CI."""
import pytest

from dumpgym.record import targets as target
from needs_extras import EXTRAS, check


@pytest.mark.parametrize("marker", sorted(EXTRAS))
def test_a_marked_test_skips_where_its_extra_is_missing(marker, request, monkeypatch):
    monkeypatch.setattr(target, EXTRAS[marker][0], lambda: False)
    monkeypatch.delenv("CI", raising=False)
    request.node.add_marker(marker)
    with pytest.raises(pytest.skip.Exception, match=rf"pip install 'dumpgym\[{EXTRAS[marker][1]}\]'"):
        check(request.node)


@pytest.mark.parametrize("marker", sorted(EXTRAS))
def test_under_ci_a_marked_test_fails_in_one_line_where_its_extra_is_missing(marker, request, monkeypatch):
    monkeypatch.setattr(target, EXTRAS[marker][0], lambda: False)
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("DUMPGYM_WITHOUT_EXTRAS", raising=False)
    request.node.add_marker(marker)
    with pytest.raises(pytest.fail.Exception) as failed:
        check(request.node)
    assert not failed.value.pytrace and len(str(failed.value).splitlines()) == 1
    assert f"the {EXTRAS[marker][1]} extra" in str(failed.value)


@pytest.mark.parametrize("marker", sorted(EXTRAS))
def test_under_ci_an_environment_made_without_extras_skips_instead(marker, request, monkeypatch):
    """scripts/test-compat's environment (the oldest JAX, `.[test]` alone) says so: CI does not fail there."""
    monkeypatch.setattr(target, EXTRAS[marker][0], lambda: False)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("DUMPGYM_WITHOUT_EXTRAS", "1")
    request.node.add_marker(marker)
    with pytest.raises(pytest.skip.Exception, match=rf"pip install 'dumpgym\[{EXTRAS[marker][1]}\]'"):
        check(request.node)


@pytest.mark.parametrize("marker", sorted(EXTRAS))
def test_a_marked_test_runs_where_its_extra_is_installed_and_only_its_own_extra_counts(marker, request, monkeypatch):
    for other, (installed, _, _) in EXTRAS.items():
        monkeypatch.setattr(target, installed, lambda other=other: other == marker)
    monkeypatch.setenv("CI", "true")
    request.node.add_marker(marker)
    check(request.node)  # neither skips nor fails


def test_an_unmarked_test_runs_whatever_is_missing(request, monkeypatch):
    for installed, _, _ in EXTRAS.values():
        monkeypatch.setattr(target, installed, lambda: False)
    monkeypatch.setenv("CI", "true")
    check(request.node)


def test_every_marker_is_registered(pytestconfig):
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(EXTRAS) <= registered
    assert all(callable(getattr(target, installed)) for installed, _, _ in EXTRAS.values())
