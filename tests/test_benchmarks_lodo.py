"""benchmarks/lodo_sentiment.py (the leave-one-domain-out dev) on tiny data written here:
what each fold trains and scores on, and the cache that lets a run resume without mixing runs.
Only the TF-IDF system: the taskflow system trains a model per fold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

@pytest.fixture(scope="module")
def lodo(benchmark_script):
    return benchmark_script("lodo_sentiment")


GOOD, BAD = ["很好", "不错", "喜欢", "满意"], ["很差", "失望", "难用", "垃圾"]


def reviews(prefix: str, count: int) -> list[tuple[int, str]]:
    """``count`` distinct labelled texts, both labels, each naming ``prefix`` (a product); one has a
    double quote, which the TSV files carry as it is (they are read with QUOTE_NONE)."""
    rows = []
    for i in range(count):
        label = i % 2
        words = (GOOD if label else BAD)
        rows.append((label, f"{prefix}{words[i % 4]}{words[(i // 4) % 4]}{i}" + '"' * (i == 3)))
    return rows


def write_tsv(path: Path, rows, header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [header] + ["\t".join(map(str, row)) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture()
def data(tmp_path) -> Path:
    root = tmp_path / "sentiment"
    write_tsv(root / "chnsenticorp" / "train.tsv", reviews("酒店", 24), "label\ttext")
    write_tsv(root / "chnsenticorp" / "dev.tsv", reviews("房间", 8), "label\ttext")
    write_tsv(root / "waimai_10k" / "train.tsv", reviews("外卖", 24), "label\ttext")
    for split, count in (("train", 16), ("dev", 6), ("test", 4)):
        rows = [(label, f"{split}{text}", cat) for cat in ("衣服", "水果", "手机")
                for label, text in reviews(cat, count)]
        write_tsv(root / "online_shopping_10_cats" / f"{split}.tsv", rows, "label\ttext\tcat")
    return root


def test_a_fold_trains_without_its_category_and_scores_its_dev_rows(lodo, data, tmp_path):
    fold = lodo.make_fold(data, "水果")
    assert len(fold.train_texts) == 24 + 24 + 2 * 16
    assert not [t for t in fold.train_texts if "水果" in t]
    assert len(fold.dev_texts) == 6 and all(t.startswith("dev水果") for t in fold.dev_texts)
    assert len(fold.test_texts) == 4 and all(t.startswith("test水果") for t in fold.test_texts)

    folder = tmp_path / "fold"
    lodo.write_fold_folder(data, "水果", folder)
    shopping = (folder / "online_shopping_10_cats" / "train.tsv").read_text(encoding="utf-8")
    assert "水果" not in shopping and shopping.count("\n") == 1 + 2 * 16
    assert shopping.splitlines()[1:] == [line for line in (data / "online_shopping_10_cats" / "train.tsv")
                                         .read_text(encoding="utf-8").splitlines()[1:] if "水果" not in line]
    assert not (folder / "online_shopping_10_cats" / "dev.tsv").exists()
    assert (folder / "chnsenticorp" / "dev.tsv").read_text(encoding="utf-8") == \
        (data / "chnsenticorp" / "dev.tsv").read_text(encoding="utf-8")


def test_a_scored_text_seen_in_training_is_refused(lodo, data):
    dev_text = lodo.read_rows(data / "online_shopping_10_cats" / "dev.tsv")[0]["text"]
    with open(data / "waimai_10k" / "train.tsv", "a", encoding="utf-8") as handle:
        handle.write(f"1\t{dev_text}\n")
    with pytest.raises(ValueError, match="also training texts"):
        lodo.make_fold(data, "衣服")


def test_tfidf_folds_are_cached_and_keyed_on_the_data(lodo, data, tmp_path, monkeypatch):
    results, work = tmp_path / "RESULTS.md", tmp_path / "work"
    argv = ["--data", str(data), "--work", str(work), "--systems", "tfidf", "--results", str(results)]
    lodo.main(argv)
    text = results.read_text(encoding="utf-8")
    assert "<!-- BEGIN sentiment_lodo -->" in text
    for category in ("衣服", "水果", "手机"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {category} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:4] == ["80", "6", lodo.NOT_RUN]        # training texts, n dev, taskflow not run
        assert 0.0 <= float(cells[4]) <= 1.0
    cached = sorted(work.glob("tfidf-*/*.json"))
    assert len(cached) == 4      # run.json and one per category
    first = json.loads(next(p for p in cached if p.name == "水果.json").read_text(encoding="utf-8"))
    assert first["dev"]["n"] == 6 and first["test"]["n"] == 4

    def must_not_run(*args):
        raise AssertionError("a cached fold was computed again")

    monkeypatch.setitem(lodo.SCORERS, "tfidf", must_not_run)
    lodo.main(argv)       # resumes from the cache: the same figures

    def table_of(markdown: str) -> list[str]:
        return [line for line in markdown.splitlines() if line.startswith("|")]

    assert table_of(results.read_text(encoding="utf-8")) == table_of(text)

    with open(data / "waimai_10k" / "train.tsv", "a", encoding="utf-8") as handle:
        handle.write("0\t外卖送错了\n")
    with pytest.raises(AssertionError, match="computed again"):
        lodo.main(argv)   # other data: another key, so nothing cached applies
