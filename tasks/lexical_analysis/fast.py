"""``Taskflow("word_segmentation", mode="fast")``: jieba, with the dictionary its package pins.

PaddleNLP's fast segmentation is jieba, and so is ours: a dictionary and an HMM for unseen words,
no network, several times the lexical model's speed, on jieba's segmentation standard (F1 0.814
on MSR's, where the lexical model has 0.972: ``benchmarks/bench_lexical_peers.py``).  The package
(``word_segmentation/jieba``) holds jieba's dictionary, gzip-compressed and pinned by sha256 like
any package file, so the words do not change with the jieba that happens to be installed, and the
package resolves, downloads and works offline as the others do.  jieba itself is a dependency.

:func:`build_package` writes the package from the installed jieba's ``dict.txt``.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path
from typing import Any

from taskflow.errors import ManifestError
from taskflow.task import Option, TextTask

from .tagger import normalize, words_from_labels
from .user_dict import load_user_dict

__all__ = ["JiebaSegmentationTask", "build_package", "DICTIONARY"]

DICTIONARY = "dict.txt.gz"


class JiebaSegmentationTask(TextTask):
    """Words by jieba (``jieba.Tokenizer.tokenize``, HMM on, as ``jieba.lcut``); whitespace runs
    are one word each, as in the default mode, so ``"".join(words) == text``.

    ``user_dict`` / ``user_dict_format`` are the base mode's (LAC's ``花 开`` lines or jieba's
    ``word [freq] [tag]``), applied the same way after jieba: an item found in the text (on the
    normalised text, longest first) becomes its words, whatever jieba cut.
    """

    name = "word_segmentation"   # picked by WordSegmentationTask.class_for for word_segmentation packages
    single_text_unwrapped = True
    runs_network = False
    declared = {
        "user_dict": Option(None, "the base mode's user dictionary (LAC's ``花 开`` lines or jieba's ``word [freq] "
                                  "[tag]``), applied after jieba.", "str"),
        "user_dict_format": Option("auto", "how user_dict's lines are read: ``auto``, ``lac`` or ``jieba``.", "str"),
    }

    def __init__(self, model, *, user_dict: Any = None, user_dict_format: str = "auto",
                 batch_size: int | None = None):
        super().__init__(model, batch_size=batch_size)
        name = self.manifest.get("dictionary")
        if not name:
            raise ManifestError(f"model {model.name!r}: a jieba package names its 'dictionary' file")
        self.user_dict = load_user_dict(user_dict, user_dict_format, normalize=normalize)
        self.tokenizer = _tokenizer(model.path(name))

    def run_items(self, items: list[str]) -> list[list[str]]:
        return [self.words(text) for text in items]     # no windows, no batches: jieba reads any length

    def words(self, text: str) -> list[str]:
        if self.user_dict is not None:
            begins, tags = [False] * len(text), [""] * len(text)
            for _, start, _ in self.tokenizer.tokenize(text):
                begins[start] = True
            self.user_dict.apply(normalize(text), begins, tags)
            return [text[s:e] for s, e, _ in words_from_labels(text, begins, tags)]
        out: list[str] = []
        for word, start, _ in self.tokenizer.tokenize(text):
            if word.isspace() and out and out[-1].isspace():
                out[-1] += word                  # one word per whitespace run
            else:
                out.append(word)
        return out


def _tokenizer(path: Path):
    """A jieba Tokenizer over the package's gzip dictionary, loaded now (so a bad file fails at
    construction, and jieba's prefix-dict messages are kept off the caller's stderr)."""
    try:
        import jieba
    except ImportError as exc:
        raise ImportError("word_segmentation mode='fast' runs jieba: pip install jieba") from exc

    class Tokenizer(jieba.Tokenizer):
        def get_dict_file(self):
            return gzip.open(self.dictionary, "rb")

    tokenizer = Tokenizer(dictionary=str(path))
    level = jieba.default_logger.level
    jieba.default_logger.setLevel(logging.WARNING)
    try:
        tokenizer.initialize()
    except (OSError, ValueError, EOFError) as exc:     # gzip, UTF-8 and "word freq" layout errors alike
        raise ManifestError(f"{path}: not a jieba dictionary (gzip 'word freq [tag]' lines): "
                            f"{type(exc).__name__}: {exc}") from exc
    finally:
        jieba.default_logger.setLevel(level)
    return tokenizer


def build_package(out: str | Path, version: str = "1.0.0"):
    """``word_segmentation/jieba`` from the installed jieba's ``dict.txt``."""
    import io
    from importlib import metadata

    import jieba

    from taskflow.files import atomic_write_bytes
    from taskflow.packages import write_package

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = Path(jieba.__file__).parent / "dict.txt"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as handle:
        handle.write(source.read_bytes())
    atomic_write_bytes(out / DICTIONARY, buffer.getvalue())      # no time stamp: same bytes, same sha256
    fields = {
        "task": "word_segmentation", "name": "jieba", "version": version, "engine": "jieba",
        "description": "jieba's dictionary and HMM: word segmentation without a network (mode='fast')",
        "dictionary": DICTIONARY,
        "training": {"data": {"dictionary": f"jieba {metadata.version('jieba')} dict.txt (MIT licence)"}},
    }
    return write_package(out, fields, {DICTIONARY: out / DICTIONARY})


if __name__ == "__main__":
    import sys

    manifest = build_package(sys.argv[1] if len(sys.argv) > 1 else "resources/word_segmentation/jieba")
    print(f"{manifest.name} {manifest.version}: {sum(e['size'] for e in manifest.files.values()):,} bytes")
