"""The `needs_tpu` and `needs_gpu` markers: a marked test skips where its compiler extra is missing,
and fails instead under CI, which installs every extra (scripts/test), so that no skip hides there.

An environment made without the extras on purpose says so with `DUMPGYM_WITHOUT_EXTRAS=1`
(scripts/test-compat's, the oldest JAX with `.[test]` alone): there a marked test skips, CI or not."""
import os

import pytest

# marker -> (the name in dumpgym.record.targets of the check that the extra is installed, the extra, what it brings)
EXTRAS = {
    "needs_tpu": ("libtpu_installed", "tpu", "libtpu"),
    "needs_gpu": ("cuda_plugin_installed", "gpu", "JAX's CUDA plugin"),
}


def check(item) -> None:
    """Skip `item` (fail it under `CI`) when a marker it carries names an extra that is not installed."""
    from dumpgym.record import targets as target

    for marker, (installed, extra, brings) in EXTRAS.items():
        if item.get_closest_marker(marker) and not getattr(target, installed)():
            missing = f"the {extra} extra ({brings}) is not installed: pip install 'dumpgym[{extra}]'"
            if os.environ.get("CI") and not os.environ.get("DUMPGYM_WITHOUT_EXTRAS"):
                pytest.fail(f"CI installs every extra, but {missing}", pytrace=False)
            pytest.skip(missing)


# A built-in program's platform -> the marker of the extra that lowers it (`Program.platform`).
PLATFORM_MARKERS = {"tpu": pytest.mark.needs_tpu, "gpu": pytest.mark.needs_gpu}


def builtin_slugs() -> list:
    """Every built-in program's slug for `parametrize`, marked with the extra its platform needs (pallas-matmul
    lowers only for a TPU, so tracing it needs libtpu)."""
    from dumpgym.corpus.builtin import load_builtin
    from dumpgym.programs import SLUGS

    # The platform as the committed corpus records it: importing the program modules to ask them would
    # run their module-level JAX (a mesh, `jax.shard_map`) at collection, which the oldest JAX lacks.
    platform = {p["slug"]: p.get("platform", "cpu") for p in load_builtin()["programs"]}
    marks = {slug: PLATFORM_MARKERS.get(platform.get(slug, "cpu")) for slug in SLUGS}
    return [slug if marks[slug] is None else pytest.param(slug, marks=marks[slug]) for slug in SLUGS]
