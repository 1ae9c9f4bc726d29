"""Corpus-pretrained char, char-bigram and word vectors: the pretraining a CPU can afford.

    python -m pretraining.vectors --corpus ../shared/data/corpus --data ../shared/data \\
        --out pretraining/runs/vectors

The fast models (lexical BiGRU-CRF, sentiment CNN, similarity matcher, reading-comprehension
reader) are trained from scratch on a few hundred thousand labelled sentences of one genre each;
a char or bigram they never met in training is a random row, and that is where they fail off
genre.  Skip-gram vectors trained on the 89.5M-char corpus plus the labelled sets' **train** text
(never a dev or test split) give every frequent char, bigram and word a meaning before the
labelled data is read, and a bigram table that covers the corpus's bigrams, not only MSRA's.

What is written to ``--out``:

* ``vectors.npz``: for each kind ``K`` in ``char``, ``bigram``, ``word``: ``K_tokens`` (the
  strings, most frequent first), ``K_counts`` (corpus counts) and ``K_vectors`` (float16 rows,
  one per token), loaded with ``np.load(allow_pickle=False)`` (:func:`taskflow.corpus_vectors.load_vectors`).
  A recipe starts its embedding tables from it with ``--vectors DIR``.
* ``vectors.json``: the sources, the settings, the counts and sizes, minutes per kind, and each
  kind's nearest neighbours for a few probe tokens (a quick look at what was learned).

Every text is first put through the fast models' normalisation (``t2s width lower space``, char
for char), so a row's key is exactly what a model looks up.  Words come from jieba (HMM on),
whose boundaries are close enough to MSRA's for a vector table; a bigram is two adjacent chars,
space included (word boundaries in Latin text matter), with ``BOS``/``EOS`` marks at line ends as
the lexical model reads them.  gensim (``pip install gensim``) trains in ``corpus_file`` mode,
which runs its workers without Python's lock; a line is at most 10,000 tokens there, so longer
documents are cut.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from taskflow.text import Normalizer

from .labelled import SOURCES, texts
from .vocab import read_documents

NORMALIZATION = ("t2s", "width", "lower", "space")   # the fast models' (lexical, similarity, mrc)
BOS, EOS = "\x02", "\x03"                            # the lexical model's bigram marks at a text's ends
# gensim splits lines on whitespace, so the space char travels as a private-use stand-in.
SPACE_STANDIN = "\ue000"
MAX_LINE_TOKENS = 10_000   # gensim's corpus_file limit per line
KINDS = ("char", "bigram", "word")
PROBES = {
    "char": ["华", "哈", "赞", "贵", "的"],
    "bigram": ["华为", "哈哈", "手机", "好吃", "公司"],
    "word": ["华为", "星巴克", "哈哈哈", "性价比", "拜登", "微博", "不错"],
}


@dataclass
class Settings:
    dims: dict[str, int]
    min_counts: dict[str, int]
    max_tokens: dict[str, int]
    epochs: int = 3
    window: int = 5
    negative: int = 5
    sample: float = 1e-4
    workers: int = 2
    seed: int = 1


# ------------------------------------------------------------------ tokens
def char_tokens(text: str) -> list[str]:
    return list(text)


def bigram_tokens(text: str) -> list[str]:
    padded = BOS + text + EOS
    return [padded[i:i + 2] for i in range(len(padded) - 1)]


def _jieba_words() -> Callable[[str], list[str]]:
    try:
        import jieba
    except ImportError:
        raise SystemExit("word vectors need jieba: pip install jieba") from None
    jieba.setLogLevel(60)
    return lambda text: [w for w in jieba.lcut(text, HMM=True) if not w.isspace()]


def _encode(token: str) -> str:
    return token.replace(" ", SPACE_STANDIN)


def _decode(token: str) -> str:
    return token.replace(SPACE_STANDIN, " ")


def write_token_file(documents: Iterable[str], tokenize: Callable[[str], list[str]], path: Path) -> int:
    """One line of space-separated tokens per document (cut at ``MAX_LINE_TOKENS``); the token count."""
    total = 0
    with open(path, "w", encoding="utf-8") as handle:
        for document in documents:
            tokens = [_encode(t) for t in tokenize(document)]
            total += len(tokens)
            for start in range(0, len(tokens), MAX_LINE_TOKENS):
                handle.write(" ".join(tokens[start:start + MAX_LINE_TOKENS]) + "\n")
    return total


# ------------------------------------------------------------------ documents
def corpus_documents(corpus: Path | None, data: Path | None, normalize: Callable[[str], str],
                     max_chars: int | None = None, exclude: frozenset[str] = frozenset()) -> Iterator[str]:
    """Normalised documents: the corpus parts, then the labelled sets' train text; a line that is
    also a dev sentence (``exclude``, raw text) is left out."""
    streams: list[Iterable[str]] = []
    if corpus is not None:
        streams += [read_documents(p) for p in sorted(corpus.glob("*.txt.gz"))]
    if data is not None:
        streams += [texts(data, relative, how) for relative, how in SOURCES if (data / relative).exists()]
    seen = 0
    for stream in streams:
        for document in stream:
            if document.strip() in exclude:
                continue
            # A real private-use char would read as a space after the round trip: drop it.
            document = normalize(document).replace(SPACE_STANDIN, "").strip()
            if not document:
                continue
            yield document
            seen += len(document)
            if max_chars is not None and seen >= max_chars:
                return


DEFAULT_EXCLUDE = Path(__file__).resolve().parent.parent / "recipes" / "lexical_analysis" / "dev" / "genre_dev.jsonl"


def _dev_texts(paths: Iterable[Path]) -> Iterator[str]:
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)["text"].strip()


# ------------------------------------------------------------------ training
def train_kind(kind: str, token_file: Path, settings: Settings) -> dict:
    from gensim.models import Word2Vec

    started = time.monotonic()
    model = Word2Vec(
        corpus_file=str(token_file), vector_size=settings.dims[kind], window=settings.window,
        min_count=settings.min_counts[kind], max_final_vocab=settings.max_tokens[kind], sg=1,
        negative=settings.negative, sample=settings.sample, workers=settings.workers,
        epochs=settings.epochs, seed=settings.seed,
    )
    vectors = model.wv
    tokens = [_decode(t) for t in vectors.index_to_key]   # most frequent first
    counts = np.array([vectors.get_vecattr(t, "count") for t in vectors.index_to_key], dtype=np.int64)
    probes = {}
    for probe in PROBES[kind]:
        if _encode(probe) in vectors.key_to_index:
            probes[probe] = [(_decode(t), round(float(s), 3)) for t, s in vectors.most_similar(_encode(probe), topn=6)]
    return {
        "tokens": np.array(tokens), "counts": counts, "vectors": vectors.vectors.astype(np.float16),
        "minutes": round((time.monotonic() - started) / 60, 1), "probes": probes,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="folder of corpus parts (*.txt.gz), e.g. ../shared/data/corpus")
    parser.add_argument("--data", type=Path, help="the shared data folder, for its labelled train splits")
    parser.add_argument("--out", type=Path, required=True, help="output folder (vectors.npz, vectors.json)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which of char,bigram,word to train")
    parser.add_argument("--char-dim", type=int, default=128)
    parser.add_argument("--bigram-dim", type=int, default=64)
    parser.add_argument("--word-dim", type=int, default=128)
    parser.add_argument("--min-count", type=int, default=5, help="a token seen fewer times gets no vector")
    parser.add_argument("--max-bigrams", type=int, default=400_000, help="keep the most frequent bigrams")
    parser.add_argument("--max-words", type=int, default=300_000, help="keep the most frequent words")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--max-chars", type=int, help="stop reading after this many chars (a quick run)")
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="a JSON-lines dev set whose 'text's are left out of the corpus (repeatable); "
                             "default: the lexical out-of-genre dev set, whose corpus lines would leak otherwise")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.corpus is None and args.data is None:
        parser.error("give --corpus, --data or both")
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"--kinds: unknown {sorted(unknown)}; choose from {','.join(KINDS)}")
    settings = Settings(
        dims={"char": args.char_dim, "bigram": args.bigram_dim, "word": args.word_dim},
        min_counts={"char": args.min_count, "bigram": args.min_count, "word": args.min_count},
        max_tokens={"char": None, "bigram": args.max_bigrams, "word": args.max_words},
        epochs=args.epochs, workers=args.workers, seed=args.seed,
    )
    exclude = frozenset(_dev_texts(args.exclude or [DEFAULT_EXCLUDE]))
    normalize = Normalizer(NORMALIZATION)
    tokenizers = {"char": char_tokens, "bigram": bigram_tokens}
    if "word" in kinds:
        tokenizers["word"] = _jieba_words()
    args.out.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    report: dict = {"sources": {"corpus": str(args.corpus) if args.corpus else None,
                                "labelled_train": str(args.data) if args.data else None,
                                "max_chars": args.max_chars, "excluded_dev_lines": len(exclude)},
                    "normalization": list(NORMALIZATION), "settings": vars(settings), "kinds": {}}
    with tempfile.TemporaryDirectory(dir=args.out) as scratch:
        for kind in kinds:
            started = time.monotonic()
            token_file = Path(scratch) / f"{kind}.txt"
            total = write_token_file(corpus_documents(args.corpus, args.data, normalize, args.max_chars, exclude),
                                     tokenizers[kind], token_file)
            tokenizing = (time.monotonic() - started) / 60
            print(f"{kind}: {total:,} tokens written in {tokenizing:.1f} min; training...", flush=True)
            trained = train_kind(kind, token_file, settings)
            token_file.unlink()
            for name in ("tokens", "counts", "vectors"):
                arrays[f"{kind}_{name}"] = trained[name]
            report["kinds"][kind] = {
                "corpus_tokens": total, "vocabulary": len(trained["tokens"]), "dim": settings.dims[kind],
                "tokenize_minutes": round(tokenizing, 1), "train_minutes": trained["minutes"],
                "probes": trained["probes"],
            }
            print(f"{kind}: {len(trained['tokens']):,} vectors in {trained['minutes']} min", flush=True)
            for probe, neighbours in trained["probes"].items():
                print(f"  {probe}: {' '.join(t for t, _ in neighbours)}", flush=True)
    final = args.out / "vectors.npz"
    with tempfile.NamedTemporaryFile(dir=args.out, suffix=".npz", delete=False) as handle:
        np.savez(handle, **arrays)
    os.replace(handle.name, final)
    (args.out / "vectors.json").write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"wrote {final} ({final.stat().st_size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
