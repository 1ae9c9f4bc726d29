"""The model package a recipe writes, and what its manifest records of how it was made.

* :class:`PackageDraft`: files made in a scratch folder, then a manifest pinning each by sha256
  and size.
* :func:`framework_versions`: the library versions a manifest records.
* :func:`portable_path`: how a manifest names a data file (no local folders).
"""

from __future__ import annotations

import argparse
import time
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from .recipe_command import default_name
from .training import log

__all__ = ["PackageDraft", "framework_versions", "portable_path"]


class PackageDraft:
    """The model package a recipe writes: its files are made in a scratch folder
    (``draft / "vocab.json"``), and :meth:`write` copies them to ``args.out`` with a manifest
    naming the task, ``args.name`` and ``args.version`` and pinning each file by sha256 and size.

    >>> with PackageDraft(args, "text_similarity") as draft:            # doctest: +SKIP
    ...     draft.ship_weights(network, float16=lambda name: "_emb." in name)
    ...     vocab.save(draft / "vocab.json")
    ...     draft.write({"architecture": ..., "metrics": ...})
    """

    def __init__(self, args: argparse.Namespace, task: str, *, started: float | None = None):
        self.out = Path(args.out)
        self.identity = {"task": task, "name": args.name or default_name(self.out), "version": args.version}
        self.started = time.time() if started is None else started
        self.quiet = bool(getattr(args, "quiet", False))    # own-data runs: --quiet
        self._names: list[str] = []     # in the order asked for, which the manifest keeps

    def __enter__(self) -> "PackageDraft":
        self._scratch = tempfile.TemporaryDirectory(prefix="taskflow-package-")
        self.folder = Path(self._scratch.name)
        return self

    def __exit__(self, *exc) -> None:
        self._scratch.cleanup()

    def __truediv__(self, name: str) -> Path:
        if name not in self._names:
            self._names.append(name)
        return self.folder / name

    def ship_weights(self, network, float16: Callable[[str], bool], name: str = "weights.npz",
                     int8: Callable[[str], bool] = lambda name: False) -> Path:
        """Save ``network``'s weights as they ship (``float16(name)`` ones halved, ``int8(name)`` ones
        quartered) and load them back into it, so that what the recipe evaluates next is exactly what ships."""
        from taskflow.weights import load_weights, save_weights

        path = self / name
        save_weights(network, path, float16=float16, int8=int8)
        load_weights(network, path)
        network.eval()
        return path

    def write(self, fields: Mapping[str, Any]):
        """Write the package: every file made in the draft, and the manifest (identity, then ``fields``)."""
        from taskflow.packages import write_package

        files = {name: self.folder / name for name in self._names if (self.folder / name).is_file()}
        manifest = write_package(self.out, {**self.identity, **fields}, files)
        size = sum(entry["size"] for entry in manifest.files.values())
        if not self.quiet:
            log(f"wrote {self.out}: {manifest.name} {manifest.version}, {size / 1e6:.1f} MB, "
                f"{(time.time() - self.started) / 60:.1f} min after the start")
        return manifest


_MODULES = {"paddlepaddle": "paddle", "numpy": "numpy", "scikit-learn": "sklearn", "jieba": "jieba"}


def framework_versions(*distributions: str) -> dict[str, str]:
    """``{"paddlepaddle": "3.3.1", ...}``: the versions of the libraries a package was trained with.

    Read from the imported modules, not the installed distributions' metadata: paddlepaddle-gpu
    is imported as ``paddle`` too, and has no ``paddlepaddle`` distribution.
    """
    import importlib

    return {name: importlib.import_module(_MODULES.get(name, name)).__version__ for name in distributions}


def portable_path(path: str | Path, root: str | Path | None = None) -> str:
    """A data file as a shipped manifest records it: relative to the data root ``root`` when it
    is below it, else its folder and name, never the folders of the machine it was built on."""
    path = Path(path)
    if root:
        try:
            return path.resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return "/".join(path.parts[-2:])
