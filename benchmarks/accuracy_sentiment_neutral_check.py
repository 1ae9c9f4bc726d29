"""sentiment_analysis with ``neutral=True`` on plain statements and on opinions, per kind.

    python benchmarks/accuracy_sentiment_neutral_check.py [--task-path PACKAGE]

The set (recipes/sentiment_analysis/dev/neutral_check.tsv, written by hand for this check, never
trained or selected on): 214 statements without an opinion (customer-service questions, schedules,
specifications, instructions, announcements, prices, addresses, plain facts: label ``neutral``) and
205 opinions (questions that carry one, such as 为什么这么难用？; reviews; posts; short plain
opinions).  Reported: the share of statements answered ``neutral``, per kind, and the accuracy on
the opinions, a ``neutral`` answer counted wrong.  Figures go to benchmarks/RESULTS.md; with
``--task-path`` that three-label package is measured in place of ``char_cnn_neutral`` and only
printed.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, table, update_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "recipes" / "sentiment_analysis" / "dev" / "neutral_check.tsv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task-path", action="append", default=[],
                        help="a three-label package to measure (RESULTS.md left alone); repeatable")
    args = parser.parse_args()
    from taskflow import Taskflow

    with open(CHECK, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    texts = [r["text"] for r in rows]
    flows = ({Path(p).name: Taskflow("sentiment_analysis", task_path=p, neutral=True, offline=True)
              for p in args.task_path} if args.task_path
             else {"neutral=True": Taskflow("sentiment_analysis", neutral=True, offline=True)})
    said = {name: [r["label"] for r in flow(texts)] for name, flow in flows.items()}

    def share(name, keep) -> str:
        pairs = [(s, r["label"]) for s, r in zip(said[name], rows) if keep(r)]
        return f"{sum(s == g for s, g in pairs) / len(pairs):.3f}"

    groups = [("statements: answered neutral", lambda r: r["label"] == "neutral")]
    groups += [(f"  {kind}", lambda r, kind=kind: r["label"] == "neutral" and r["kind"] == kind)
               for kind in dict.fromkeys(r["kind"] for r in rows if r["label"] == "neutral")]
    groups += [("opinions: right polarity", lambda r: r["label"] != "neutral")]
    groups += [(f"  {kind}", lambda r, kind=kind: r["label"] != "neutral" and r["kind"] == kind)
               for kind in dict.fromkeys(r["kind"] for r in rows if r["label"] != "neutral")]
    out = [[name, sum(keep(r) for r in rows), *(share(f, keep) for f in flows)] for name, keep in groups]
    missed = {name: [r["text"] for s, r in zip(said[name], rows) if r["label"] == "neutral" and s != "neutral"]
              for name in flows}
    body = "\n".join([
        "## sentiment_analysis: neutral=True on plain statements",
        "",
        f"{sum(r['label'] == 'neutral' for r in rows)} hand-written statements without an opinion and "
        f"{sum(r['label'] != 'neutral' for r in rows)} opinions (recipes/sentiment_analysis/dev/neutral_check.tsv; "
        "never trained or selected on), through `Taskflow('sentiment_analysis', neutral=True)`. Models: "
        + "; ".join(f"{n}: `{f.task.manifest.name}` {f.task.manifest.version}" for n, f in flows.items())
        + f". Machine: {machine()}. Command: `python benchmarks/accuracy_sentiment_neutral_check.py`.",
        "",
        table(["texts", "n", *flows], out),
        "",
        "A `neutral` answer on an opinion counts wrong. Statements not answered neutral (first model, first 20): "
        + "、".join(next(iter(missed.values()))[:20]) + ".",
    ])
    if not args.task_path:
        update_section("sentiment_neutral_check", body)
    print(body)


if __name__ == "__main__":
    main()
