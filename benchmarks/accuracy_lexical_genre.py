"""PER/LOC/ORG F1 off MSRA's genre: the shipped lexical model, jieba.posseg and Baidu LAC on the
hand-checked out-of-genre dev set (recipes/lexical_analysis/dev/genre_dev.jsonl), overall and per part.

    .venv-paddle3/bin/python benchmarks/accuracy_lexical_genre.py

LAC runs in its own venv (``benchmarks/peers/setup.sh`` makes ``benchmarks/peers/.venv-lac``:
paddlepaddle 2.6.2) through ``recipes/lexical_analysis/lac_labels.py``; without that venv its column
says so.  Scoring is the recipe's own (``train.score_spans``), so these figures are comparable with
what ``python -m recipes.lexical_analysis.train --evaluate-only`` prints for the genre dev set.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import table, update_section

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(REPO))      # the lab (recipes/): the genre dev set, its reader and scoring
GENRE_DEV = REPO / "recipes" / "lexical_analysis" / "dev" / "genre_dev.jsonl"
LAC_PYTHON = REPO / "benchmarks" / "peers" / ".venv-lac" / "bin" / "python"
COMMAND = ".venv-paddle3/bin/python benchmarks/accuracy_lexical_genre.py"
JIEBA_ENTITY = {"nr": "PER", "nrfg": "PER", "nrt": "PER", "ns": "LOC", "nt": "ORG"}


def lac_words(texts: list[str], python: Path) -> list[list[tuple[str, str]]] | str:
    """LAC's (word, tag) pairs per text, or why it did not run."""
    if not python.exists():
        return f"not run: no {python} (bash benchmarks/peers/setup.sh)"
    with tempfile.TemporaryDirectory() as scratch:
        source, out = Path(scratch) / "texts.txt", Path(scratch) / "lac.jsonl"
        source.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        done = subprocess.run([str(python), str(REPO / "recipes/lexical_analysis/lac_labels.py"), "--texts", str(source),
                               "--out", str(out)], capture_output=True, text=True)
        if done.returncode:
            return f"not run: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return [list(zip(r["words"], r["tags"])) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lac-python", type=Path, default=LAC_PYTHON)
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args()

    import jieba
    import jieba.posseg

    from taskflow import Taskflow
    from recipes.lexical_analysis.silver import read_genre_dev, word_spans
    from recipes.lexical_analysis.train import score_spans

    jieba.setLogLevel(60)
    gold = read_genre_dev(GENRE_DEV)
    parts = [json.loads(line).get("part", "?") for line in GENRE_DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [text for text, _ in gold]
    flow = Taskflow("pos_tagging", batch_size=64)
    engines = {
        f"taskflow lexical_analysis ({flow.task.model.manifest['version']}, shipped)": flow(texts),
        f"jieba {jieba.__version__} posseg (nr/ns/nt)": [[(p.word, JIEBA_ENTITY.get(p.flag, p.flag))
                                                         for p in jieba.posseg.cut(t)] for t in texts],
        "LAC 2.1.2 on paddlepaddle 2.6.2": lac_words(texts, args.lac_python),
    }
    by_part = collections.defaultdict(list)
    for i, part in enumerate(parts):
        by_part[part].append(i)
    header = ["engine", "P", "R", "**F1**", *(f"{p} ({len(ix)})" for p, ix in by_part.items())]
    rows = []
    for name, words in engines.items():
        if isinstance(words, str):
            rows.append([name, words, "", "", *[""] * len(by_part)])
            continue
        spans = [word_spans(pairs) for pairs in words]
        overall = score_spans(spans, gold)["all"]
        per_part = [score_spans([spans[i] for i in ix], [gold[i] for i in ix])["all"]["f1"] for ix in by_part.values()]
        rows.append([name, overall["precision"], overall["recall"], f"**{overall['f1']}**", *per_part])
    entities = sum(len(spans) for _, spans in gold)
    body = "\n".join([
        "## lexical_analysis: off MSRA's genre",
        "",
        f"PER/LOC/ORG entity P/R/F1 on the hand-checked out-of-genre dev set `{GENRE_DEV.relative_to(REPO)}` "
        f"({len(gold)} sentences, {entities} entities; the columns after F1 are F1 per part, sentences in brackets; "
        "see its README). Exact span and type match, scored by the recipe's `score_spans`. "
        f"Command: `{COMMAND}`.",
        "",
        table(header, rows),
        "",
    ])
    if not args.no_write:
        update_section("lexical_genre", body)
    print(body)


if __name__ == "__main__":
    sys.exit(main())
