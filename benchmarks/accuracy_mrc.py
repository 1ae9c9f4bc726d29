"""reading_comprehension accuracy of the shipped model on CMRC 2018 dev, through
the product (Taskflow, static graph), beside a simple heuristic baseline on
the same questions, both scored with CMRC 2018's official EM / F1.

    python benchmarks/accuracy_mrc.py --data ../shared/data/mrc/cmrc2018

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, table, update_section  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with dev.json (CMRC 2018)")
    parser.add_argument("--limit", type=int, help="first N questions only (smoke runs)")
    args = parser.parse_args()

    from taskflow import Taskflow
    from taskflow.tasks.reading_comprehension.metrics import evaluate
    from taskflow.tasks.reading_comprehension.train import read_squad

    rows = read_squad(Path(args.data) / "dev.json")[: args.limit]
    references = [r["answers"] for r in rows]
    flow = Taskflow("reading_comprehension")
    manifest = flow.task.manifest
    start = time.perf_counter()
    results = flow([{"context": r["context"], "question": r["question"]} for r in rows])
    seconds = time.perf_counter() - start
    for r, out in zip(rows, results):
        assert r["context"][out["start"]:out["end"]] == out["answer"]
    model = evaluate(references, [out["answer"] for out in results])
    null = Taskflow("reading_comprehension", handle_impossible_answer=True)(
        [{"context": r["context"], "question": r["question"]} for r in rows[:500]])
    empty_share = sum(1 for out in null if not out["answer"]) / max(1, len(null))

    picked = [baseline(r["context"], r["question"]) for r in rows]
    base_span = evaluate(references, [a for a, _ in picked])
    base_sentence = evaluate(references, [s for _, s in picked])
    recorded = manifest.get("metrics", {})
    training = manifest.get("training", {})

    rows_out = [
        [f"`{manifest.name}` {manifest.version} (through `Taskflow`, static graph)", f"{model['em']:.1f}",
         f"{model['f1']:.1f}"],
        ["baseline: best-overlap sentence, longest run of chars not in the question", f"{base_span['em']:.1f}",
         f"{base_span['f1']:.1f}"],
        ["baseline: the best-overlap sentence itself", f"{base_sentence['em']:.1f}", f"{base_sentence['f1']:.1f}"],
    ]
    body = "\n".join([
        "## reading_comprehension: accuracy",
        "",
        f"CMRC 2018 dev ({len(rows):,} questions, 3 reference answers each), official scoring (EM on "
        "punctuation-stripped strings, F1 from the longest common substring of the mixed char / latin-word "
        "segmentations, each the best over the references). Machine: " + machine() + ". Command: "
        "`python benchmarks/accuracy_mrc.py --data ../shared/data/mrc/cmrc2018`.",
        "",
        table(["system", "EM", "F1"], rows_out),
        "",
        f"The model reads windows of {flow.task.max_seq_len} chars ({flow.task.doc_stride} overlap), answers up to "
        f"{flow.task.max_answer_len} chars; the whole dev set took {seconds:.0f} s "
        f"({len(rows) / seconds:.1f} questions/s, default batch of {flow.task.batch_size} windows). "
        f"Trained {training.get('train_minutes', '?')} min on CMRC 2018 train, epoch chosen on trial "
        f"(selection F1 {recorded.get('selection', {}).get('f1', '?')}). "
        f"With `handle_impossible_answer=True`, {100 * empty_share:.1f}% of the first 500 dev questions "
        "(all answerable) get the empty answer.",
        "",
        "Published, for scale (large pretrained encoders, not comparable in size or data): BERT-base 87 F1 on "
        "CMRC test, ERNIE 2.0 base 88.6 F1 on dev.",
    ])
    update_section("mrc_accuracy", body)
    print(body)


if __name__ == "__main__":
    main()
