"""sentiment_analysis leave-one-domain-out dev: the off-genre figure.

    python benchmarks/lodo_sentiment.py --data ../shared/data/sentiment --work DIR --systems tfidf
    python benchmarks/lodo_sentiment.py --data ../shared/data/sentiment --work DIR --systems taskflow \\
        [--recipe-args "--epochs 1 --wide-epochs 1"] [--folds 书籍,热水器]

Protocol.  online_shopping_10_cats has ten categories (its third column, ``cat``).  For each
category c, one fold:

- training: the online_shopping_10_cats train rows whose category is not c, plus all of
  ChnSentiCorp train and waimai_10k train;
- scoring: the online_shopping_10_cats **dev** rows of category c.  This is a dev figure, the one
  decisions are made on; the test rows of c are scored too and shown in a column labelled
  "report only".

The off-genre figure is the mean of the ten folds' dev accuracies (each category counts once,
whatever its size); the table also gives n per category, the accuracy pooled over all scored rows,
and the mean over the seven categories that are not ChnSentiCorp's own genres (ChnSentiCorp,
always in training, is hotel, notebook and book reviews: 酒店, 计算机, 书籍).

Systems (``--systems``, default both):

- ``tfidf``: char 1-3-gram TF-IDF + logistic regression, ``baseline()`` of accuracy_sentiment.py,
  fitted on the fold's training texts (seconds per fold);
- ``taskflow``: the sentiment recipe (``python -m recipes.sentiment_analysis.train``) run in
  a subprocess on a folder laid out like ``--data`` that holds only the fold's training rows (the
  three ``train.tsv``; online_shopping_10_cats/dev.tsv is left out; the files the recipe selects,
  calibrates and reports on, ChnSentiCorp dev and the test splits, are linked as they are), then
  the package scored through ``Taskflow("sentiment_analysis", task_path=...)``.  A full recipe run
  is ~35-40 min per fold on 2 cores; ``--recipe-args`` is passed to the recipe as it is.

Each fold's result is a JSON file under ``--work``, in a folder keyed on the system, the sha256 of
every data file and, for taskflow, the recipe arguments (for tfidf, baseline()'s source): an
interrupted run resumes where it stopped, and runs with other arguments or data never mix.  A
taskflow fold's package is kept under the same folder (``packages/<category>``) and its training
log beside it.  Every run rewrites the section sentiment_lodo of benchmarks/RESULTS.md from all
the cached folds of the current key (a system or fold not run shows "not run yet").

Needs scikit-learn (`pip install '.[train]'`).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Callable

sys.path.insert(0, str(Path(__file__).parent))
from accuracy_sentiment import baseline  # noqa: E402
from common import RESULTS, machine, table, update_section  # noqa: E402

REPOSITORY = str(Path(__file__).resolve().parents[1])
PROTOCOL = "lodo-1"   # part of every cache key: change it when the protocol changes
SHOPPING = "online_shopping_10_cats"
OTHER_SETS = ("chnsenticorp", "waimai_10k")
SET_ORDER = ("chnsenticorp", SHOPPING, "waimai_10k")   # the recipe's --train-sets order (ChnSentiCorp first)
CHNSENTICORP_GENRES = ("酒店", "计算机", "书籍")
SYSTEMS = ("tfidf", "taskflow")
SYSTEM_NAMES = {"tfidf": "TF-IDF + LR", "taskflow": "taskflow"}
# The recipe's own options that the protocol sets; --recipe-args must not set them.
RESERVED_RECIPE_OPTIONS = ("--data-dir", "--out", "--train-sets", "--train", "--dev", "--calibrate", "--deep-init")
NOT_RUN = "not run yet"


@dataclass
class Fold:
    """One category held out: the texts a system trains on, and the rows it is scored on."""

    category: str
    train_texts: list[str]
    train_labels: list[int]
    dev_texts: list[str]
    dev_labels: list[int]
    test_texts: list[str]
    test_labels: list[int]


def read_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def categories(data: Path) -> list[str]:
    """online_shopping_10_cats' categories, the largest dev share first."""
    counts: dict[str, int] = {}
    for row in read_rows(data / SHOPPING / "dev.tsv"):
        counts[row["cat"]] = counts.get(row["cat"], 0) + 1
    return sorted(counts, key=lambda c: (-counts[c], c))


def make_fold(data: Path, category: str) -> Fold:
    """The fold that holds ``category`` out (the protocol in the module docstring)."""
    texts, labels = [], []
    for name in SET_ORDER:
        for row in read_rows(data / name / "train.tsv"):
            if name == SHOPPING and row["cat"] == category:
                continue
            texts.append(row["text"])
            labels.append(int(row["label"]))
    scored = {}
    for split in ("dev", "test"):
        rows = [r for r in read_rows(data / SHOPPING / f"{split}.tsv") if r["cat"] == category]
        if split == "dev" and not rows:
            raise ValueError(f"{category!r} has no rows in {data / SHOPPING / 'dev.tsv'}; "
                             f"categories there: {', '.join(categories(data))}")
        scored[split] = ([r["text"] for r in rows], [int(r["label"]) for r in rows])
    # A scored text that is also a training text would make the held-out category partly seen.
    seen = set(texts)
    for split, (split_texts, _) in scored.items():
        shared = [t for t in split_texts if t in seen]
        if shared:
            raise ValueError(f"fold {category}: {len(shared)} {split} texts are also training texts, e.g. {shared[0]!r}")
    return Fold(category, texts, labels, *scored["dev"], *scored["test"])


def write_fold_folder(data: Path, category: str, folder: Path) -> None:
    """``folder`` laid out like ``data`` for the recipe, with only the fold's training rows.

    The three ``train.tsv`` (online_shopping_10_cats' without ``category``); the other files of the
    three sets, which the recipe reads for selection, calibration and its report (ChnSentiCorp
    dev, the test splits), are linked; online_shopping_10_cats/dev.tsv, the scored split, is not
    there at all."""
    for name in SET_ORDER:
        (folder / name).mkdir(parents=True)
        for source in sorted((data / name).iterdir()):
            if source.name == "train.tsv" and name == SHOPPING:
                # Line by line, so the kept rows are byte for byte the original ones (the files are
                # read with QUOTE_NONE: a row is a line, its fields split at tabs).
                with open(source, encoding="utf-8", newline="") as src, \
                        open(folder / name / "train.tsv", "w", encoding="utf-8", newline="") as dst:
                    header = next(src)
                    column = header.rstrip("\r\n").split("\t").index("cat")
                    dst.write(header)
                    dst.writelines(line for line in src if line.rstrip("\r\n").split("\t")[column] != category)
            elif source.is_file() and not (name == SHOPPING and source.name == "dev.tsv"):
                (folder / name / source.name).symlink_to(source.resolve())


def accuracy(predicted, gold) -> dict:
    correct = sum(int(p) == int(g) for p, g in zip(predicted, gold))
    return {"n": len(gold), "correct": correct, "accuracy": correct / len(gold) if gold else None}


def score_tfidf(fold: Fold, data: Path, work: Path, recipe_args: list[str]) -> dict:
    start = time.perf_counter()
    model = baseline(fold.train_texts, fold.train_labels)
    result = {"dev": accuracy(model.predict(fold.dev_texts), fold.dev_labels)}
    if fold.test_texts:
        result["test"] = accuracy(model.predict(fold.test_texts), fold.test_labels)
    return {**result, "seconds": round(time.perf_counter() - start, 1)}


def score_taskflow(fold: Fold, data: Path, work: Path, recipe_args: list[str]) -> dict:
    """Train the fold's package with the recipe (unless a finished one is in ``work``), then score it."""
    packages = work / "packages"
    package, partial, log_path = packages / fold.category, packages / f"{fold.category}.partial", \
        work / "logs" / f"{fold.category}.log"
    seconds = None
    if not (package / "manifest.json").is_file():
        # The recipe writes the manifest, then calibrates it in place: only its exit status says
        # that the package is finished, so it trains under another name and is renamed after.
        shutil.rmtree(partial, ignore_errors=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="fold-", dir=work) as folder:
            write_fold_folder(data, fold.category, Path(folder))
            command = [sys.executable, "-m", "recipes.sentiment_analysis.train", "--data-dir", folder,
                       "--out", str(partial), *recipe_args]
            # The recipe is lab code, importable from the repository root.
            env = {**os.environ,
                   "PYTHONPATH": os.pathsep.join(filter(None, (REPOSITORY, os.environ.get("PYTHONPATH"))))}
            print(f"[{fold.category}] training: {shlex.join(command)} (log: {log_path})", flush=True)
            with open(log_path, "w", encoding="utf-8") as log:
                code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        if code != 0:
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            raise SystemExit(f"[{fold.category}] the recipe exited with {code}; last lines of {log_path}:\n"
                             + "\n".join(tail))
        shutil.rmtree(package, ignore_errors=True)
        partial.rename(package)
        seconds = round(time.perf_counter() - start)

    from taskflow import Taskflow

    flow = Taskflow("sentiment_analysis", task_path=str(package), offline=True)

    def predict(texts: list[str]) -> list[int]:
        return [int(r["label"] == "positive") for r in flow(texts)]

    result = {"dev": accuracy(predict(fold.dev_texts), fold.dev_labels), "package": str(package),
              "training_seconds": seconds}
    if fold.test_texts:
        result["test"] = accuracy(predict(fold.test_texts), fold.test_labels)
    return result


SCORERS: dict[str, Callable[[Fold, Path, Path, list[str]], dict]] = {"tfidf": score_tfidf, "taskflow": score_taskflow}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_hashes(data: Path) -> dict[str, str]:
    """sha256 of every file of the three sets (the folds use or link all of them)."""
    return {f"{name}/{p.name}": sha256(p) for name in SET_ORDER for p in sorted((data / name).iterdir()) if p.is_file()}


def run_spec(system: str, hashes: dict[str, str], recipe_args: list[str]) -> dict:
    """What a cached fold result depends on; its hash names the folder the folds are kept in."""
    spec = {"protocol": PROTOCOL, "system": system, "data": hashes}
    if system == "taskflow":
        spec["recipe_args"] = recipe_args
    else:
        spec["baseline"] = inspect.getsource(baseline)
    return spec


def run_folder(work: Path, spec: dict) -> Path:
    key = hashlib.sha256(json.dumps(spec, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return work / f"{spec['system']}-{key[:16]}"


def commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "taskflow", "tasks"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+uncommitted changes" if dirty else "")


def run_fold(system: str, folder: Path, data: Path, category: str, recipe_args: list[str]) -> dict:
    """The cached result of ``system`` on the fold holding out ``category``, computed if missing."""
    path = folder / f"{category}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    fold = make_fold(data, category)
    result = {"system": system, "category": category, "train_texts": len(fold.train_texts),
              **SCORERS[system](fold, data, folder, recipe_args), "commit": commit()}
    from taskflow.files import atomic_write_text

    atomic_write_text(path, json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    return result


def cached_folds(folder: Path, cats: list[str]) -> dict[str, dict]:
    return {c: json.loads((folder / f"{c}.json").read_text(encoding="utf-8"))
            for c in cats if (folder / f"{c}.json").is_file()}


def summary(folds: dict[str, dict], cats: list[str], split: str) -> dict[str, str]:
    """Mean over categories, pooled, and mean outside ChnSentiCorp's genres, as table cells."""
    done = [c for c in cats if c in folds and split in folds[c]]

    def partial(cells: list[str], wanted: list[str]) -> str:
        got = [c for c in wanted if c in done]
        if not got:
            return NOT_RUN
        value = cells(got)
        return f"{value:.4f}" + ("" if len(got) == len(wanted) else f" ({len(got)} of {len(wanted)} folds)")

    def macro(got):
        return mean(folds[c][split]["accuracy"] for c in got)

    def pooled(got):
        return sum(folds[c][split]["correct"] for c in got) / sum(folds[c][split]["n"] for c in got)

    outside = [c for c in cats if c not in CHNSENTICORP_GENRES]
    return {"mean": partial(macro, cats), "pooled": partial(pooled, cats), "outside": partial(macro, outside)}


def section(results: dict[str, dict[str, dict]], cats: list[str], sizes: dict[str, dict[str, int]],
            recipe_args: list[str], command: str) -> str:
    def cell(system: str, category: str, split: str) -> str:
        fold = results[system].get(category)
        return f"{fold[split]['accuracy']:.4f}" if fold and split in fold else NOT_RUN

    def difference(category: str, split: str) -> str:
        a, b = (results[s].get(category) for s in ("taskflow", "tfidf"))
        if not (a and b and split in a and split in b):
            return ""
        return f"{a[split]['accuracy'] - b[split]['accuracy']:+.4f}"

    rows = []
    for c in cats:
        train = next((results[s][c]["train_texts"] for s in SYSTEMS if c in results[s]), "")
        rows.append([c + (" (a ChnSentiCorp genre)" if c in CHNSENTICORP_GENRES else ""), train, sizes[c]["dev"],
                     cell("taskflow", c, "dev"), cell("tfidf", c, "dev"), difference(c, "dev"), sizes[c]["test"],
                     cell("taskflow", c, "test"), cell("tfidf", c, "test")])
    sums = {s: {split: summary(results[s], cats, split) for split in ("dev", "test")} for s in SYSTEMS}
    outside = [c for c in cats if c not in CHNSENTICORP_GENRES]
    labels = {"mean": f"**mean over the {len(cats)} categories (the off-genre figure)**", "pooled": "pooled over all rows",
              "outside": f"mean over the {len(outside)} outside ChnSentiCorp's genres "
                         f"({', '.join(CHNSENTICORP_GENRES)} left out)"}
    for name, label in labels.items():
        def value(s, split):
            return sums[s][split][name]

        def gap(split):
            a, b = value("taskflow", split), value("tfidf", split)
            same = " (" not in a + b and NOT_RUN not in (a, b)
            return f"{float(a) - float(b):+.4f}" if same else ""

        n_dev = sum(sizes[c]["dev"] for c in cats) if name == "pooled" else ""
        n_test = sum(sizes[c]["test"] for c in cats) if name == "pooled" else ""
        rows.append([label, "", n_dev, value("taskflow", "dev"), value("tfidf", "dev"), gap("dev"), n_test,
                     value("taskflow", "test"), value("tfidf", "test")])

    seconds = [r["seconds"] for r in results["tfidf"].values() if r.get("seconds") is not None]
    trained = [r["training_seconds"] for r in results["taskflow"].values() if r.get("training_seconds")]
    commits = sorted({r.get("commit", "unknown") for s in SYSTEMS for r in results[s].values()})
    recipe = shlex.join(recipe_args) if recipe_args else "none: the full recipe, its defaults"
    notes = [
        "TF-IDF + LR: `baseline()` of accuracy_sentiment.py (char 1-3-gram TF-IDF, logistic regression C=4) "
        "fitted per fold" + (f", {mean(seconds):.0f} s per fold on average." if seconds else "."),
        f"taskflow: the recipe `python -m recipes.sentiment_analysis.train` per fold, with extra arguments: "
        f"`{recipe}`; its package scored through `Taskflow('sentiment_analysis', task_path=...)`"
        + (f"; {mean(trained) / 60:.0f} min of training per fold on average." if trained else "."),
        f"Folds from code at commit {', '.join(commits) or 'none yet'}. Machine: {machine()}. Command: `{command}`.",
    ]
    return "\n".join([
        "## sentiment_analysis: leave-one-domain-out dev",
        "",
        f"For each of online_shopping_10_cats' {len(cats)} categories c: train on its train rows outside c plus ChnSentiCorp "
        "train and waimai_10k train; score on its **dev** rows of c (the figure decisions are made on). The test rows "
        "of c are scored too, in the columns marked *report only*. The off-genre figure is the mean over the "
        "categories, each counting once; the target is taskflow >= TF-IDF + LR + 3 points on it. "
        "ChnSentiCorp (hotel, notebook and book reviews) is always in training, so 酒店, 计算机 and 书籍 are not "
        "fully off-genre; the last row leaves them out. The small categories' figures are noisy (n = dev rows).",
        "",
        *notes,
        "",
        table(["held-out category", "training texts", "n dev", "taskflow dev", "TF-IDF + LR dev", "difference",
               "n test", "taskflow test (report only)", "TF-IDF + LR test (report only)"], rows),
    ])


def split_sizes(data: Path, cats: list[str]) -> dict[str, dict[str, int]]:
    sizes = {c: {"dev": 0, "test": 0} for c in cats}
    for split in ("dev", "test"):
        for row in read_rows(data / SHOPPING / f"{split}.tsv"):
            if row["cat"] in sizes:
                sizes[row["cat"]][split] += 1
    return sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/sentiment",
                        help="the sentiment data folder (default: %(default)s)")
    parser.add_argument("--work", required=True,
                        help="folder for the cached fold results, the fold packages and the training logs")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, of: tfidf, taskflow "
                        "(default: both)")
    parser.add_argument("--folds", help="comma-separated categories to run (default: all of them)")
    parser.add_argument("--recipe-args", default="",
                        help='extra arguments for the taskflow recipe, as one string: "--epochs 1 --wide-epochs 1"')
    parser.add_argument("--results", type=Path, default=RESULTS, help="the RESULTS.md to write the section into")
    args = parser.parse_args(argv)
    args.system_list = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(args.system_list) - set(SYSTEMS))
    if unknown or not args.system_list:
        parser.error(f"--systems: unknown {unknown}; systems are {', '.join(SYSTEMS)}")
    args.recipe_list = shlex.split(args.recipe_args)
    reserved = [a for a in args.recipe_list if a.split("=")[0] in RESERVED_RECIPE_OPTIONS]
    if reserved:
        parser.error(f"--recipe-args: {', '.join(reserved)} is set by the protocol (one folder per fold)")
    return args


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    data, work = Path(args.data), Path(args.work)
    cats = categories(data)
    wanted = cats if not args.folds else [c.strip() for c in args.folds.split(",") if c.strip()]
    missing = [c for c in wanted if c not in cats]
    if missing:
        raise SystemExit(f"--folds: {', '.join(missing)} not in {SHOPPING}; its categories: {', '.join(cats)}")

    hashes = data_hashes(data)
    folders = {s: run_folder(work, run_spec(s, hashes, args.recipe_list)) for s in SYSTEMS}
    for system in args.system_list:
        folder = folders[system]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.json").write_text(json.dumps(run_spec(system, hashes, args.recipe_list), ensure_ascii=False,
                                                    indent=1) + "\n", encoding="utf-8")
        for category in wanted:
            result = run_fold(system, folder, data, category, args.recipe_list)
            print(f"{system} {category}: dev {result['dev']['accuracy']:.4f} (n={result['dev']['n']})", flush=True)

    results = {s: cached_folds(folders[s], cats) for s in SYSTEMS}
    command = "python benchmarks/lodo_sentiment.py " + shlex.join(argv)
    body = section(results, cats, split_sizes(data, cats), args.recipe_list, command)
    update_section("sentiment_lodo", body, path=args.results)
    print(body)


if __name__ == "__main__":
    main()
