"""Pretraining data: corpus parts -> cached id arrays -> packed sequences -> masked batches.

* :func:`load_part`: one corpus file as ids (uint16), documents separated by ``[SEP]``, and, for
  whole-word masking, which ids start a word.  Cached by file, vocabulary and segmenter, so the
  tokenising (and jieba, minutes over the whole corpus) happens once per machine; the cache files
  can be made on one machine and carried to another.
* :class:`PackedCorpus`: all parts end to end, cut into ``seq_len - 2`` ids per sequence
  (``[CLS] ... [SEP]``, no padding, documents running across sequences as in RoBERTa's
  FULL-SENTENCES), drawn in a seeded random order per epoch; its position is two numbers, saved
  in every checkpoint so a resumed run reads on where it stopped.
* :func:`mask_batch`: which positions to predict (15% of chars, or of chars in whole words), with
  BERT's 80% ``[MASK]`` / 10% random / 10% kept; its generator is seeded by the step, so a resumed
  run masks as the uninterrupted one would have.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from taskflow.encoder import CLS, MASK, NORMALIZATION, SEP, SPECIAL_TOKENS, CharVocab
from taskflow.text import Normalizer

from .vocab import read_documents

SHARD_SUFFIX = ".u16.xz"          # pretraining.shards' pieces, and the file beside them naming each
SHARD_MANIFEST = "shards.json"
IGNORE = -100   # the label of positions that are not predicted (PyTorch's cross-entropy default)


# ------------------------------------------------------------- segmenters
def _jieba() -> Callable[[str], list[str]]:
    try:
        import jieba
    except ImportError:
        raise SystemExit("whole-word masking with --segmenter jieba needs jieba: pip install jieba") from None
    jieba.setLogLevel(60)
    return lambda text: jieba.lcut(text, HMM=True)


# Word boundaries for whole-word masking.  jieba for now; the project's own lexical model (ERNIE's
# knowledge masking over its words and entities) is the aim, and would be one more entry here.
SEGMENTERS: dict[str, Callable[[], Callable[[str], list[str]]]] = {"jieba": _jieba}


def word_starts(text: str, cut: Callable[[str], list[str]]) -> np.ndarray:
    """A bool per char of ``text``: does a word start there."""
    starts = np.zeros(len(text), dtype=bool)
    position = 0
    for word in cut(text):
        starts[position] = True
        position += len(word)
    if position != len(text):
        raise ValueError(f"the segmenter's words do not add up to the text ({position} of {len(text)} chars)")
    return starts


# ------------------------------------------------------------------ parts
@dataclass
class Part:
    name: str
    ids: np.ndarray                   # uint16, documents each followed by [SEP]
    starts: np.ndarray | None         # bool per id, or None without a segmenter


def _segment_document(args):
    text, segmenter = args
    return word_starts(text, _segmenter_cache(segmenter))


_SEGMENTER_INSTANCES: dict = {}


def _segmenter_cache(name: str):
    if name not in _SEGMENTER_INSTANCES:
        _SEGMENTER_INSTANCES[name] = SEGMENTERS[name]()
    return _SEGMENTER_INSTANCES[name]


def vocab_digest(vocab: CharVocab) -> str:
    return hashlib.sha256("\n".join(vocab.tokens).encode("utf-8")).hexdigest()[:16]


def load_part(path: str | Path, vocab: CharVocab, *, segmenter: str | None, cache_dir: str | Path | None,
              workers: int = 1, log: Callable[[str], None] = print) -> Part:
    """One corpus file as ids (and word starts), from the cache when it holds this file as it is now.

    A shard piece (``*.u16.xz``, :mod:`pretraining.shards`) is already ids: read as it is, after
    checking that it was tokenised with this vocabulary."""
    path = Path(path)
    if path.name.endswith(SHARD_SUFFIX):
        if segmenter:
            raise ValueError(f"{path}: shard pieces hold ids only; whole-word masking needs the text parts")
        ids = read_piece(path, vocab_digest(vocab))
        log(f"{path.name}: {len(ids)} ids (shard)")
        return Part(path.name, ids, None)
    stat = path.stat()
    key = hashlib.sha256(repr((path.name, stat.st_size, stat.st_mtime_ns, vocab_digest(vocab), NORMALIZATION,
                               segmenter)).encode()).hexdigest()[:16]
    cached = Path(cache_dir) / f"{path.name}.{key}.npz" if cache_dir else None
    if cached is not None and cached.is_file():
        with np.load(cached) as stored:
            starts = np.unpackbits(stored["starts"], count=len(stored["ids"])).astype(bool) if segmenter else None
            return Part(path.name, stored["ids"], starts)

    normalize = Normalizer(NORMALIZATION)
    documents = [normalize(line) for line in read_documents(path)]
    ids = np.concatenate([np.append(vocab.encode_array(d), SEP) for d in documents] or [np.zeros(0, np.int32)])
    ids = ids.astype(np.uint16)
    starts = None
    if segmenter:
        jobs = [(d, segmenter) for d in documents]
        if workers > 1:
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(workers) as pool:
                flags = pool.map(_segment_document, jobs, chunksize=256)
        else:
            flags = [_segment_document(job) for job in jobs]
        # [SEP] after each document is a word of its own.
        starts = np.concatenate([np.append(f, True) for f in flags] or [np.zeros(0, bool)])
    log(f"{path.name}: {len(documents)} documents, {len(ids)} ids"
        f"{f', {int(starts.sum())} words' if starts is not None else ''}")
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as handle:
                np.savez(handle, ids=ids, starts=np.packbits(starts) if starts is not None else np.zeros(0, np.uint8))
            os.replace(tmp, cached)
        finally:
            tmp.unlink(missing_ok=True)
    return Part(path.name, ids, starts)


def read_piece(path: str | Path, digest: str | None = None) -> np.ndarray:
    """One piece's ids, checked against ``shards.json`` beside it (sha256, count, vocabulary)."""
    path = Path(path)
    manifest_path = path.parent / SHARD_MANIFEST
    if not manifest_path.is_file():
        raise ValueError(f"{path}: no {SHARD_MANIFEST} beside it (write shards with python -m pretraining.shards)")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    entry = next((p for p in manifest["pieces"] if p["name"] == path.name), None)
    if entry is None:
        raise ValueError(f"{path}: not listed in {manifest_path}")
    if digest is not None and manifest["vocab_digest"] != digest:
        raise ValueError(f"{path} was tokenised with vocabulary {manifest['vocab_digest']}, this run's is "
                         f"{digest}: write the shards again with the run's vocabulary")
    if manifest["normalization"] != list(NORMALIZATION):
        raise ValueError(f"{path} was normalised as {manifest['normalization']}, the encoder reads "
                         f"{list(NORMALIZATION)}: write the shards again")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ValueError(f"{path}: sha256 differs from {SHARD_MANIFEST} (a damaged or partial copy)")
    ids = np.frombuffer(lzma.decompress(data), dtype="<u2").astype(np.uint16)
    if len(ids) != entry["ids"]:
        raise ValueError(f"{path}: {len(ids)} ids, {SHARD_MANIFEST} says {entry['ids']}")
    return ids


# ------------------------------------------------------------------ order
class PackedCorpus:
    """All parts end to end as ``len(self)`` sequences of ``seq_len`` ids, in a seeded order per epoch.

    ``heldout`` sequences (drawn once from the seed) are kept out of training, for an evaluation loss.
    """

    def __init__(self, parts: Sequence[Part], seq_len: int, seed: int, heldout: int = 0):
        if seq_len < 3:
            raise ValueError(f"seq_len must be at least 3 ([CLS], one id, [SEP]), got {seq_len}")
        self.ids = np.concatenate([p.ids for p in parts])
        self.starts = None
        if all(p.starts is not None for p in parts):
            self.starts = np.concatenate([p.starts for p in parts])
        self.seq_len, self.seed = seq_len, seed
        self.body = seq_len - 2
        count = len(self.ids) // self.body
        if count <= heldout:
            raise ValueError(f"the corpus makes {count} sequences of {seq_len}; need more than the {heldout} held out")
        order = np.random.default_rng([seed, 0xE7A1]).permutation(count)
        self.heldout, self.train = np.sort(order[:heldout]), np.sort(order[heldout:])
        self.epoch, self.offset = 0, 0
        self.fingerprint = hashlib.sha256(repr((
            [(p.name, len(p.ids)) for p in parts], seq_len, seed, heldout)).encode()).hexdigest()[:16]
        self._order = None

    def __len__(self) -> int:
        return len(self.train)

    def state(self) -> dict:
        return {"epoch": self.epoch, "offset": self.offset, "fingerprint": self.fingerprint}

    def restore(self, state: dict) -> bool:
        """Read on from a checkpoint's position; False (and start over) when the corpus or the
        sequence length changed, since the position then means nothing."""
        if state.get("fingerprint") != self.fingerprint:
            return False
        self.epoch, self.offset, self._order = int(state["epoch"]), int(state["offset"]), None
        return True

    def _epoch_order(self) -> np.ndarray:
        if self._order is None:
            self._order = self.train[np.random.default_rng([self.seed, self.epoch]).permutation(len(self.train))]
        return self._order

    def next_indices(self, batch_size: int) -> np.ndarray:
        chosen = []
        while len(chosen) < batch_size:
            order = self._epoch_order()
            take = order[self.offset:self.offset + batch_size - len(chosen)]
            chosen.extend(take.tolist())
            self.offset += len(take)
            if self.offset >= len(order):
                self.epoch, self.offset, self._order = self.epoch + 1, 0, None
        return np.asarray(chosen)

    def sequences(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``[CLS] body [SEP]`` ids [N, seq_len] int64, and word starts (the first body id always starts one)."""
        spans = indices[:, None] * self.body + np.arange(self.body)[None, :]
        ids = np.empty((len(indices), self.seq_len), dtype=np.int64)
        ids[:, 0], ids[:, -1] = CLS, SEP
        ids[:, 1:-1] = self.ids[spans]
        starts = None
        if self.starts is not None:
            starts = np.ones((len(indices), self.seq_len), dtype=bool)
            starts[:, 1:-1] = self.starts[spans]
            starts[:, 1] = True
        return ids, starts


# ---------------------------------------------------------------- masking
def mask_batch(ids: np.ndarray, starts: np.ndarray | None, rng: np.random.Generator, vocab_size: int,
               rate: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, labels)``: ``rate`` of the chars (of the words, when ``starts`` says where words
    begin: all of a word's chars or none) to predict; labels hold the original id there and
    ``IGNORE`` elsewhere.  Special tokens and ``[UNK]`` are never predicted."""
    candidate = ids >= len(SPECIAL_TOKENS)
    if starts is None:
        chosen = rng.random(ids.shape) < rate
    else:
        word = np.cumsum(starts.ravel()) - 1           # word index of each position, across the batch
        chosen = (rng.random(word[-1] + 1) < rate)[word].reshape(ids.shape)
    chosen &= candidate
    if not chosen.any() and candidate.any():           # a loss over no position is NaN
        chosen.ravel()[rng.choice(np.flatnonzero(candidate))] = True
    labels = np.where(chosen, ids, IGNORE)
    inputs = ids.copy()
    action = rng.random(ids.shape)
    inputs[chosen & (action < 0.8)] = MASK
    randomised = chosen & (action >= 0.8) & (action < 0.9)
    inputs[randomised] = rng.integers(len(SPECIAL_TOKENS), vocab_size, size=int(randomised.sum()))
    return inputs, labels
