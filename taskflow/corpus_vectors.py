"""What a network's token tables start from: the corpus vectors ``python -m pretraining.vectors``
writes, and jieba's words for the recipes that find their word lists with it.

* :func:`load_vectors`: one kind's tokens and vectors; :func:`vectors_report`: what a manifest
  records of them.
* :func:`pretrained_embeddings`: an embedding table for a vocabulary, started from the vectors.
* :func:`jieba_cut`: jieba's word cutter, or a message saying how to install it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Sequence

from .package_draft import portable_path

__all__ = ["load_vectors", "vectors_report", "pretrained_embeddings", "jieba_cut"]


def load_vectors(path: str | os.PathLike, kind: str) -> tuple[list[str], "np.ndarray"]:
    """``(tokens, float32 matrix)`` of one kind (``char``, ``bigram``, ``word``) from the ``vectors.npz``
    that ``python -m pretraining.vectors`` writes (a folder or the file); tokens most frequent first."""
    import numpy as np

    path = Path(path)
    if path.is_dir():
        path = path / "vectors.npz"
    with np.load(path, allow_pickle=False) as data:
        if f"{kind}_tokens" not in data:
            raise SystemExit(f"{path} has no {kind} vectors (trained kinds: "
                             f"{sorted(k[:-7] for k in data.files if k.endswith('_tokens'))})")
        return [str(t) for t in data[f"{kind}_tokens"]], data[f"{kind}_vectors"].astype(np.float32)


def vectors_report(path: str | os.PathLike) -> dict:
    """The ``vectors.json`` that ``python -m pretraining.vectors`` wrote beside ``vectors.npz`` (``{}``
    without one), its data folders as a manifest names them (:func:`portable_path`): what a recipe
    records of the vectors it started from."""
    path = Path(path)
    about = (path if path.is_dir() else path.parent) / "vectors.json"
    if not about.is_file():
        return {}
    report = json.loads(about.read_text(encoding="utf-8"))
    sources = report.get("sources") or {}
    report["sources"] = {k: portable_path(v) if k in ("corpus", "labelled_train") and v else v
                         for k, v in sources.items()}
    return report


def pretrained_embeddings(vocab: Sequence[str], tokens: Sequence[str], matrix: "np.ndarray", dim: int, *,
                          scale: float, seed: int = 0) -> tuple["np.ndarray", float]:
    """An embedding table for ``vocab`` (row i is ``vocab[i]``): the corpus vector where there is one,
    else a uniform random row in ``[-scale, scale]`` (the network's own init); and the share of
    ``vocab`` covered.  Vectors are centred and rescaled to that init's spread, so a pretrained row
    and a random one start at the same size; vectors wider than ``dim`` keep their first ``dim``
    principal components.  Row 0 (padding) stays zero."""
    import numpy as np

    matrix = matrix - matrix.mean(axis=0, keepdims=True)
    if matrix.shape[1] > dim:
        _, _, components = np.linalg.svd(matrix[:50_000], full_matrices=False)
        matrix = matrix @ components[:dim].T
    matrix = matrix / (float(matrix.std()) or 1.0) * (scale / np.sqrt(3.0))   # a uniform init's std
    index = {token: row for row, token in enumerate(tokens)}
    table = np.random.default_rng(seed).uniform(-scale, scale, size=(len(vocab), dim)).astype(np.float32)
    hits = 0
    for row, token in enumerate(vocab):
        found = index.get(token)
        if found is not None:
            table[row, : matrix.shape[1]] = matrix[found]
            hits += 1
    table[0] = 0.0
    return table, hits / max(1, len(vocab))


def jieba_cut() -> Callable[[str], list[str]]:
    """jieba's word cutter (with its HMM), for recipes that find their word lists with it."""
    try:
        import jieba
    except ImportError:
        raise SystemExit("the recipe finds its word list with jieba: pip install jieba") from None
    jieba.setLogLevel(60)
    return lambda text: jieba.lcut(text, HMM=True)
