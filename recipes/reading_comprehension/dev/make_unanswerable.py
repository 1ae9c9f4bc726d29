"""Build the unanswerable dev sets: CMRC 2018 trial questions, each paired with another article's passage.

    python recipes/reading_comprehension/dev/make_unanswerable.py --data ../shared/data/mrc/cmrc2018

writes ``unanswerable_tune.jsonl`` and ``unanswerable_report.jsonl`` beside this file, one JSON object a line:
``{"id", "question", "context", "question_id", "context_id", "absent_answers"}``; the answer to
``question`` is not in ``context`` (``absent_answers`` are the question's own answers, none of which
occurs there).

Why trial: dev is the report set (never tuned on) and train is what the models learn from (the
shipped 1.0.0 read every train question, so its null scores there would flatter it); trial is
neither for the new recipe, which selects on a held-out slice of train.  Its 256 articles are split
in two halves by a seeded shuffle: ``tune`` (what ``null_threshold`` is tuned on, with the
answerable selection set) and ``report`` (what benchmarks/accuracy_mrc.py reports, never tuned
on).  A question gets a passage from another article of its own half, drawn at random among
those that

* contain none of its answers (after the reader's normalisation, and again with punctuation and
  whitespace removed),
* share no run of 4 chars with it, name neither the question's article title nor have their own
  title in the question (no obvious overlap: a passage about the same thing could hold the answer).

Questions whose text also occurs in train (one generic one) are left out, so nothing here is a
training question; the script asserts that no passage or question is in train.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = ("tune", "report")
RUN = 4          # a shared run of this many chars counts as overlap


def _squad(path: Path) -> list[dict]:
    """Articles of a SQuAD-format file as ``{title, context, questions: [(id, question, [answers])]}``
    (CMRC 2018: one paragraph an article)."""
    out = []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            out.append({"id": paragraph["id"], "title": article.get("title", ""), "context": paragraph["context"],
                        "questions": [(qa["id"], qa["question"], [a["text"] for a in qa["answers"]])
                                      for qa in paragraph["qas"]]})
    return out


@functools.lru_cache(maxsize=None)
def _forms(text: str) -> tuple[str, str]:
    """``text`` normalised as the reader reads it without whitespace; and also without punctuation."""
    from taskflow.tasks.reading_comprehension.data import normalise
    from taskflow.tasks.reading_comprehension.metrics import remove_punctuation

    squeezed = "".join(normalise(text).split())
    return squeezed, remove_punctuation(squeezed)


def _plain(text: str) -> str:
    return _forms(text)[1]


def holds_answer(context: str, answers: list[str]) -> bool:
    """Whether any of ``answers`` occurs in ``context`` (normalised; also with punctuation removed)."""
    squeezed, plain = _forms(context)
    for answer in answers:
        a_squeezed, a_plain = _forms(answer)
        if a_squeezed and a_squeezed in squeezed or a_plain and a_plain in plain:
            return True
    return False


def overlaps(question: str, question_title: str, context: str, context_title: str) -> bool:
    """Whether the passage shares a run of ``RUN`` chars with the question or names its subject."""
    q, c = _plain(question), _plain(context)
    if any(q[i:i + RUN] in c for i in range(len(q) - RUN + 1)):
        return True
    return bool(question_title and _plain(question_title) in c) or bool(context_title and _plain(context_title) in q)


def build(trial: list[dict], train: list[dict], seed: int) -> dict[str, list[dict]]:
    """``{part: rows}`` for the two halves of ``trial``'s articles."""
    rng = random.Random(seed)
    articles = sorted(trial, key=lambda a: a["id"])
    rng.shuffle(articles)
    halves = {PARTS[0]: articles[: len(articles) // 2], PARTS[1]: articles[len(articles) // 2:]}
    train_questions = {q for a in train for _, q, _ in a["questions"]}
    out: dict[str, list[dict]] = {}
    for part, half in halves.items():
        rows = []
        for article in half:
            for qid, question, answers in article["questions"]:
                if not question.strip() or not answers or question in train_questions:
                    continue
                others = [o for o in half if o["id"] != article["id"] and not holds_answer(o["context"], answers)
                          and not overlaps(question, article["title"], o["context"], o["title"])]
                if not others:
                    continue
                other = rng.choice(others)
                rows.append({"id": f"{qid}@{other['id']}", "question": question, "context": other["context"],
                             "question_id": qid, "context_id": other["id"], "absent_answers": answers})
        out[part] = rows
    train_contexts = {a["context"] for a in train}
    for rows in out.values():
        assert not any(r["context"] in train_contexts for r in rows), "a passage of the set is in train"
        assert not any(r["question"] in train_questions for r in rows), "a question of the set is in train"
        assert not any(holds_answer(r["context"], r["absent_answers"]) for r in rows)
    assert not {r["question_id"] for r in out["tune"]} & {r["question_id"] for r in out["report"]}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="folder with trial.json and train.json (CMRC 2018)")
    parser.add_argument("--out-dir", default=str(HERE))
    parser.add_argument("--seed", type=int, default=2018)
    args = parser.parse_args(argv)
    data = Path(args.data)
    parts = build(_squad(data / "trial.json"), _squad(data / "train.json"), args.seed)
    for part, rows in parts.items():
        path = Path(args.out_dir) / f"unanswerable_{part}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"{path}: {len(rows)} questions, {len({r['question_id'].rsplit('_QUERY', 1)[0] for r in rows})} "
              f"question articles, {len({r['context_id'] for r in rows})} passages")


if __name__ == "__main__":
    main()
