"""What the lab's tuning steps share: the candidate weightings of an ensemble
(:func:`simplex_grid`), and writing what was measured or tuned on a written package into its
manifest (:func:`update_manifest`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

__all__ = ["simplex_grid", "update_manifest"]


def simplex_grid(networks: int, step: float) -> list[tuple[float, ...]]:
    """Every weighting of an ensemble's ``networks`` in multiples of ``step`` that sums to 1, each
    weight at least one step (a network with weight 0 is not a member): the candidates an
    ``ensemble_weights`` tuning scores."""
    units = round(1 / step)
    if networks < 2 or units < networks or not math.isclose(units * step, 1.0):
        raise ValueError(f"step {step}: give 1/N for a whole N of at least {networks} (the networks)")

    def splits(n: int, parts: int):
        if parts == 1:
            yield (n,)
            return
        for first in range(1, n - parts + 2):
            yield from ((first, *rest) for rest in splits(n - first, parts - 1))
    return [tuple(k / units for k in split) for split in splits(units, networks)]


def update_manifest(package_dir: str | Path, fields: Mapping[str, Any]):
    """Add or replace ``fields`` (figures measured on the written package, say) in its manifest;
    the files, and so their sha256, stay as they are."""
    from taskflow.manifest import Manifest
    from taskflow.packages import write_package

    package_dir = Path(package_dir)
    manifest = Manifest.load(package_dir / "manifest.json")
    kept = {k: v for k, v in manifest.data.items() if k != "files"}
    return write_package(package_dir, {**kept, **fields}, {name: package_dir / name for name in manifest.files})
