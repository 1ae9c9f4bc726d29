"""SQuAD-format files (CMRC 2018's format): the questions of a file as flat rows.

Pure Python (json only), so that anything reading CMRC-style data (recipes, benchmarks, the
encoder fine-tuning) reads it the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["read_squad"]


def read_squad(path: str | Path) -> list[dict]:
    """Questions of a SQuAD-format file: ``{id, context, question, answers: [str], start}``
    (``start`` the first answer's offset in the context, -1 for a question without an answer)."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)["data"]
    out = []
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                out.append({"id": qa["id"], "context": paragraph["context"], "question": qa["question"],
                            "answers": answers, "start": qa["answers"][0]["answer_start"] if answers else -1})
    return out
