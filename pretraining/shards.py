"""Corpus parts as compact token-id shards, to carry the whole corpus to a GPU machine in pieces.

    python -m pretraining.shards --corpus ../shared/data/corpus/*.txt.gz runs/labelled_train.txt.gz \\
        --checkpoint pretraining/checkpoints/mlm_6x384_34k --out runs/shards --piece-mib 14

Each part is tokenised once here (the encoder's normalisation, the checkpoint's vocabulary), cut at
document ends into pieces of about ``--piece-mib`` compressed, and written as ``NAME.NNN.u16.xz``:
the ids as little-endian uint16, xz-compressed (about 1.1 bytes an id against the gzip text's 1.1
bytes a char, but with no tokenising, normalising or OpenCC needed where they are read).
``shards.json`` beside them names the vocabulary (its digest), the normalisation, and each piece's
id count and sha256.  ``pretrain --corpus DIR/*.u16.xz`` reads them as parts (``data.load_part``),
checking the vocabulary against the run's: a piece tokenised with another vocabulary is refused.

Pieces are the unit a GPU call carries (64 MiB a call, the repository included), so a warm machine
can receive the corpus over several calls and keep the earlier pieces outside the checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
from pathlib import Path

import numpy as np

from taskflow.encoder import NORMALIZATION, SEP, CharVocab
from taskflow.files import atomic_write_bytes

from .data import SHARD_MANIFEST as MANIFEST
from .data import SHARD_SUFFIX as SUFFIX
from .data import load_part, vocab_digest


def write_piece(path: Path, ids: np.ndarray) -> str:
    """Write one piece atomically; return its sha256."""
    data = lzma.compress(ids.astype("<u2").tobytes(), preset=6)
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def cut_points(ids: np.ndarray, size: int) -> list[int]:
    """Ends of pieces of about ``size`` ids, each just after a document's [SEP]."""
    seps = np.flatnonzero(ids == SEP) + 1
    ends, start = [], 0
    while len(ids) - start > size:
        later = seps[seps >= start + size]
        end = int(later[0]) if len(later) else len(ids)
        ends.append(end)
        start = end
    if start < len(ids):
        ends.append(len(ids))
    return ends


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="+", required=True, help="corpus parts (gzip UTF-8, one document a line)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vocab", help="vocab.txt")
    source.add_argument("--checkpoint", help="a packed checkpoint folder (portable.py) or checkpoint.pt: its vocabulary")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--piece-mib", type=float, default=14.0, help="about this many MiB a piece, compressed")
    parser.add_argument("--bytes-per-id", type=float, default=1.1, help="the compression expected, to size pieces")
    args = parser.parse_args(argv)

    if args.vocab:
        vocab = CharVocab.load(args.vocab)
    else:
        from .portable import load

        vocab = CharVocab(load(args.checkpoint)["vocab"])
    digest = vocab_digest(vocab)
    args.out.mkdir(parents=True, exist_ok=True)
    size = int(args.piece_mib * 1048576 / args.bytes_per_id)
    pieces = []
    for path in args.corpus:
        part = load_part(path, vocab, segmenter=None, cache_dir=None)
        stem = Path(path).name.removesuffix(".gz").removesuffix(".txt")
        begin = 0
        for number, end in enumerate(cut_points(part.ids, size)):
            name = f"{stem}.{number:03d}{SUFFIX}"
            sha = write_piece(args.out / name, part.ids[begin:end])
            mib = (args.out / name).stat().st_size / 1048576
            pieces.append({"name": name, "part": Path(path).name, "ids": end - begin, "sha256": sha,
                           "mib": round(mib, 2)})
            print(f"{name}: {end - begin} ids, {mib:.1f} MiB", flush=True)
            begin = end
    manifest = {"vocab_digest": digest, "vocab_size": len(vocab), "normalization": list(NORMALIZATION),
                "pieces": pieces}
    tmp = args.out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, args.out / MANIFEST)
    total = sum(p["ids"] for p in pieces)
    print(f"{len(pieces)} pieces, {total} ids, {sum(p['mib'] for p in pieces):.1f} MiB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
