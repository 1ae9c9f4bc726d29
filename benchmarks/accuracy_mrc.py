"""reading_comprehension accuracy of the shipped model on CMRC 2018 dev, through
the product (Taskflow, static graph), beside a simple heuristic baseline on
the same questions, both scored with CMRC 2018's official EM / F1; the mean
length of its answers beside the references'; and "no answer" with
``handle_impossible_answer=True``: its share on the unanswerable report set
(``recipes/reading_comprehension/dev/unanswerable_report.jsonl``, never tuned
on) and what it costs on the (answerable) dev questions.

    python benchmarks/accuracy_mrc.py --data ../shared/data/mrc/cmrc2018 \
        [--task-path PACKAGE | --mode accurate] [--null-threshold X]

``--null-threshold`` runs a package with that threshold instead of its
manifest's (e.g. the shipped 1.0.0, which has none, with the value
``calibrate.py`` tuned for it).

Baseline (no learning): split the context into sentences (at 。！？；!?; and
newlines), take the sentence sharing the most char bigrams with the question
(ties: the earlier), and answer its longest run of chars that do not occur in
the question (punctuation ends a run); the whole sentence is scored too.
Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(ROOT))      # the lab (recipes/): the unanswerable sets and their reader
from common import machine, table, update_section  # noqa: E402

UNANSWERABLE = ROOT / "recipes" / "reading_comprehension" / "dev" / "unanswerable_report.jsonl"
_SENTENCE = re.compile(r"[^。！？；!?;\n]+[。！？；!?;\n]*")
_PUNCT = set("，。！？；：、,.!?;:“”‘’\"'（）()《》<>【】[]「」『』 \n\t·-—…")


def sentences(context: str) -> list[str]:
    return _SENTENCE.findall(context) or [context]


def bigrams(text: str) -> set[str]:
    return {text[i:i + 2] for i in range(len(text) - 1)}


def baseline(context: str, question: str) -> tuple[str, str]:
    """(answer, sentence): the best-overlapping sentence's longest run of chars not in the question."""
    q_bigrams, q_chars = bigrams(question), set(question)
    best = max(sentences(context), key=lambda s: len(bigrams(s) & q_bigrams))
    runs, run = [], ""
    for char in best:
        if char in q_chars or char in _PUNCT:
            if run:
                runs.append(run)
            run = ""
        else:
            run += char
    if run:
        runs.append(run)
    return (max(runs, key=len) if runs else best.strip()), best.strip()


MISS_KINDS = ("exact", "a reference plus leading chars", "a reference plus trailing chars",
              "a reference plus chars on both sides", "inside a reference (too short)", "overlaps a reference",
              "disjoint from every reference")


def miss_kind(answers: list[str], prediction: str) -> str:
    """How a prediction relates to its references (punctuation-stripped, as EM compares them): the first
    of ``MISS_KINDS`` that some reference fits.

    >>> miss_kind(["1999年"], "马云于1999年"), miss_kind(["1999年"], "1999年在杭州"), miss_kind(["杭州市"], "杭州")
    ('a reference plus leading chars', 'a reference plus trailing chars', 'inside a reference (too short)')
    """
    from taskflow.tasks.reading_comprehension.metrics import em_score, f1_score, remove_punctuation

    if em_score(answers, prediction):
        return "exact"
    predicted = remove_punctuation(prediction)
    stripped = [remove_punctuation(a) for a in answers if remove_punctuation(a)]
    inside = [a for a in stripped if a in predicted]
    if inside:
        at = [(predicted.startswith(a), predicted.endswith(a)) for a in inside]
        if any(starts for starts, _ in at):
            return "a reference plus trailing chars"
        return "a reference plus leading chars" if any(ends for _, ends in at) else "a reference plus chars on both sides"
    if predicted and any(predicted in a for a in stripped):
        return "inside a reference (too short)"
    return "overlaps a reference" if f1_score(answers, prediction) > 0 else "disjoint from every reference"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with dev.json (CMRC 2018)")
    parser.add_argument("--limit", type=int, help="first N questions only (smoke runs)")
    parser.add_argument("--task-path", help="a package folder to measure instead of the shipped model")
    parser.add_argument("--mode", help="measure this mode's model (e.g. accurate; its own RESULTS section)")
    parser.add_argument("--null-threshold", type=float, help="instead of the package's own (default: the manifest's)")
    parser.add_argument("--unanswerable", default=str(UNANSWERABLE), help="default: %(default)s")
    args = parser.parse_args()

    from taskflow import Taskflow
    from recipes.reading_comprehension.calibrate import read_unanswerable
    from taskflow.tasks.reading_comprehension.metrics import evaluate
    from taskflow.tasks.reading_comprehension.squad import read_squad

    rows = read_squad(Path(args.data) / "dev.json")[: args.limit]
    references = [r["answers"] for r in rows]
    if args.task_path and args.mode:
        parser.error("give --task-path or --mode, not both")
    where = {"task_path": args.task_path} if args.task_path else {"mode": args.mode} if args.mode else {}
    flow = Taskflow("reading_comprehension", **where)
    manifest = flow.task.manifest
    threshold = {} if args.null_threshold is None else {"null_threshold": args.null_threshold}
    # One pass gives both: with "no answer" allowed, the empty answer ranks among the spans, so the
    # best span (the answer without the option) is the first non-empty one of the top 2.
    null_flow = Taskflow("reading_comprehension", handle_impossible_answer=True, top_k=2, **where, **threshold)
    start = time.perf_counter()
    both = null_flow([{"context": r["context"], "question": r["question"]} for r in rows])
    seconds = time.perf_counter() - start
    results = [next((out for out in ranked if out["answer"]), ranked[0]) for ranked in both]
    allowed = [ranked[0] for ranked in both]
    for r, out in zip(rows, results):
        assert r["context"][out["start"]:out["end"]] == out["answer"]
    model = evaluate(references, [out["answer"] for out in results])
    answer_len = mean(len(out["answer"]) for out in results)
    kinds = Counter(miss_kind(refs, out["answer"]) for refs, out in zip(references, results))
    reference_len = mean(mean(len(a) for a in r["answers"]) for r in rows)

    allowed_f1 = evaluate(references, [out["answer"] for out in allowed])["f1"]
    empty_share = 100 * sum(1 for out in allowed if not out["answer"]) / max(1, len(allowed))
    unanswerable = read_unanswerable(args.unanswerable)[: args.limit]
    refused = [ranked[0] for ranked in null_flow([{"context": r["context"], "question": r["question"]}
                                                  for r in unanswerable])]
    refused_share = 100 * sum(1 for out in refused if not out["answer"]) / max(1, len(refused))
    command = "python benchmarks/accuracy_mrc.py --data ../shared/data/mrc/cmrc2018" + "".join(
        f" --{flag} {value}" for flag, value in [("task-path", args.task_path), ("mode", args.mode), ("null-threshold", args.null_threshold)]
        if value is not None)
    readers = flow.task.readers
    threshold_key = "ensemble_null_threshold" if len(readers) > 1 else "null_threshold"
    null_model = null_flow.task.null_model
    if null_model is not None:   # the manifest's learned rule (calibrate.py null-model) decides
        rule = (f"the manifest's `null_model`: score {null_model.bias:g} + {null_model.weights[0]:g} x margin "
                f"{null_model.weights[1]:+g} x question bigram coverage, threshold")
        threshold_key = "null_model"
    else:
        rule = "null_threshold"
    threshold_source = ("--null-threshold" if args.null_threshold is not None else f"the manifest's `{threshold_key}`"
                        if manifest.get(threshold_key) is not None else "none in the manifest: 0")
    # An ensemble: each reader alone too, in the same run (what the averaging buys).
    alone = []
    for reader in readers if len(readers) > 1 else []:
        single = Taskflow("reading_comprehension", task_path=str(reader.model.package.directory), ensemble=False)
        answers = [out["answer"] for out in single([{"context": r["context"], "question": r["question"]}
                                                    for r in rows])]
        alone.append((reader.model.manifest, evaluate(references, answers), mean(map(len, answers))))

    picked = [baseline(r["context"], r["question"]) for r in rows]
    base_span = evaluate(references, [a for a, _ in picked])
    base_sentence = evaluate(references, [s for _, s in picked])

    weights = getattr(flow.task, "weights", None)
    averaged = ("" if len(readers) == 1 else " (their mean span probabilities)" if weights is None else
                f" (their span probabilities averaged with weights {' / '.join(f'{w:g}' for w in weights)})")
    name = " + ".join(f"`{r.model.name}` {r.model.version}" for r in readers)
    rows_out = [
        [f"{name}{averaged} (through `Taskflow`, static graph)",
         f"{model['em']:.1f}", f"{model['f1']:.1f}"],
        *[[f"`{m.name}` {m.version} alone (answers {length:.1f} chars)", f"{score['em']:.1f}", f"{score['f1']:.1f}"]
          for m, score, length in alone],
        ["baseline: best-overlap sentence, longest run of chars not in the question", f"{base_span['em']:.1f}",
         f"{base_span['f1']:.1f}"],
        ["baseline: the best-overlap sentence itself", f"{base_sentence['em']:.1f}", f"{base_sentence['f1']:.1f}"],
    ]
    body = "\n".join([
        f"## reading_comprehension: accuracy{f' (mode {args.mode})' if args.mode else ''}",
        "",
        f"CMRC 2018 dev ({len(rows):,} questions, 3 reference answers each), official scoring (EM on "
        "punctuation-stripped strings, F1 from the longest common substring of the mixed char / latin-word "
        "segmentations, each the best over the references). Machine: " + machine() + ". Command: "
        f"`{command}`.",
        "",
        table(["system", "EM", "F1"], rows_out),
        "",
        f"The model reads windows of {flow.task.max_seq_len} chars ({flow.task.doc_stride} overlap), answers up to "
        f"{flow.task.max_answer_len} chars; the whole dev set took {seconds:.0f} s "
        f"({len(rows) / seconds:.1f} questions/s, default batch of {flow.task.batch_size} windows). "
        + " ".join(f"`{r.model.name}`: trained {r.model.manifest.get('training', {}).get('train_minutes', '?')} min "
                   f"on CMRC 2018 train, step chosen on {_selection(r.model.manifest)}." for r in readers),
        "",
        f"Answer length: its answers average {answer_len:.1f} chars, the references {reference_len:.1f} "
        f"(each question's mean over its references): {answer_len / reference_len:.2f}x.",
        "",
        "How its answers relate to the references (punctuation stripped; the first kind some reference fits):",
        "",
        table(["answer", "questions", "share"],
              [[kind, f"{kinds[kind]:,}", f"{100 * kinds[kind] / len(rows):.1f}%"] for kind in MISS_KINDS]),
        "",
        f"No answer (`handle_impossible_answer=True`, {rule} {null_flow.task.null_threshold:g}, "
        f"{threshold_source}): {refused_share:.1f}% of the {len(refused)} unanswerable questions of "
        f"`{Path(args.unanswerable).name}` (CMRC trial questions each paired with another article's passage, "
        f"never tuned on) get the empty answer; on dev (all answerable) {empty_share:.1f}% do, and F1 is "
        f"{allowed_f1:.2f} ({allowed_f1 - model['f1']:+.2f}).",
        "",
        "Published, for scale (large pretrained encoders, not comparable in size or data): BERT-base 87 F1 on "
        "CMRC test, ERNIE 2.0 base 88.6 F1 on dev.",
    ])
    if args.limit or args.task_path:
        print("(--limit or --task-path: RESULTS.md, which reports the shipped model on all of dev, left as it is)")
    else:
        update_section(f"mrc_accuracy_{args.mode}" if args.mode else "mrc_accuracy", body)
    print(body)


def _selection(manifest) -> str:
    """Where a reader's training step was chosen, and its F1 there (the recipe's manifest)."""
    selection = manifest.get("metrics", {}).get("selection", {})
    where = selection.get("file") or manifest.get("training", {}).get("selection_file", "?")
    return f"{where} (selection F1 {selection.get('f1', '?')})"


if __name__ == "__main__":
    main()
