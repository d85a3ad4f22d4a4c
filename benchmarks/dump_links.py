"""What fraction of a dump folder's optimised instructions the x-ray links, and how.

    python benchmarks/dump_links.py DIR [DIR ...]

For every module of the folders with StableHLO and optimised HLO, counts the instructions that
carry a full name stack (`op_name` with `/` or `(`) and how many of them `dump_xray` links to one
equation's ops, to a group of ops, or not at all, per backend. No JAX is imported; no link is
judged here (the tests judge them against tagged re-traces): this only measures how many are drawn.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from dumpgym.dumps.xray import xray_module  # noqa: E402
from dumpgym.dumps.folder import read_folder  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    folder = read_folder(*args.folders)
    totals: dict[str, Counter] = {}
    for module in folder.modules:
        if module.problem or "stablehlo" not in module.files or "hlo_after" not in module.files:
            continue
        exact, grouped, named = xray_module(module).coverage("hlo_after")
        row = totals.setdefault(module.backend or "?", Counter())
        row.update(modules=1, exact=exact, group=grouped, named=named)
    for backend, row in sorted(totals.items()):
        n = row["named"] or 1
        print(f"{backend}: {row['modules']} modules, {row['named']} instructions with a name stack: "
              f"exact {row['exact'] / n:.3f}, group {row['group'] / n:.3f}, "
              f"unlinked {(row['named'] - row['exact'] - row['group']) / n:.3f}")


if __name__ == "__main__":
    main()
