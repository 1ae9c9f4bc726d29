"""Would an ensemble of readers answer better?  A decode-time measure through the product: each
package answers every CMRC 2018 dev question with its ``top_k`` spans (``Taskflow`` with
``top_k``), a span's scores (``p_start * p_end``, each reader's own decoding) are averaged over the
readers that list it (0 where one does not), and the best average is the answer.  Scored with
CMRC's official EM / F1, beside each reader alone.  Equal weights: nothing is tuned on dev.

    python benchmarks/ensemble_mrc.py --data ../shared/data/mrc/cmrc2018 \
        --task-path resources/reading_comprehension/drqa_char --task-path OTHER_PACKAGE

A quick lower bound for trying a pair before packaging it (spans outside a reader's top ``k``
count 0 for it); a package's ``ensemble`` (tasks/reading_comprehension/README.md) scores every
span of every window instead.  It prints and writes nothing else.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from statistics import mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with dev.json (CMRC 2018)")
    parser.add_argument("--task-path", action="append", required=True, metavar="PACKAGE",
                        help="a reader package; give two or more")
    parser.add_argument("--top-k", type=int, default=20, help="spans per reader and question (default 20)")
    parser.add_argument("--limit", type=int, help="first N questions only (smoke runs)")
    args = parser.parse_args()
    if len(args.task_path) < 2:
        parser.error("give --task-path at least twice")

    from taskflow import Taskflow
    from taskflow.tasks.reading_comprehension.metrics import evaluate
    from taskflow.tasks.reading_comprehension.squad import read_squad

    rows = read_squad(Path(args.data) / "dev.json")[: args.limit]
    references = [r["answers"] for r in rows]
    items = [{"context": r["context"], "question": r["question"]} for r in rows]
    spans = []   # per reader, per question: {(start, end): (score, answer)}
    for path in args.task_path:
        results = Taskflow("reading_comprehension", task_path=path, top_k=args.top_k)(items)
        spans.append([{(c["start"], c["end"]): (c["score"], c["answer"]) for c in candidates}
                      for candidates in results])
        alone = [max(found.values())[1] if found else "" for found in spans[-1]]
        report(path, evaluate(references, alone), alone)

    answers = []
    for question in range(len(rows)):
        total, text = defaultdict(float), {}
        for reader in spans:
            for key, (score, answer) in reader[question].items():
                total[key] += score / len(spans)
                text[key] = answer
        answers.append(text[max(total, key=total.get)] if total else "")
    report(f"ensemble of {len(spans)} (equal weights)", evaluate(references, answers), answers)
    print(f"references: {mean(mean(len(a) for a in r) for r in references):.1f} chars on average; "
          f"{len(rows)} questions, top_k {args.top_k}")


def report(name: str, scores: dict, answers: list[str]) -> None:
    print(f"{name}: F1 {scores['f1']:.2f}  EM {scores['em']:.2f}  answers {mean(len(a) for a in answers):.1f} chars")


if __name__ == "__main__":
    main()
