"""The accurate modes in bf16 against fp32: every dev split, and the speed, in one run.

    OMP_NUM_THREADS=2 python benchmarks/accuracy_bf16.py --data ../shared/data    # writes RESULTS.md

The pretrained encoders' packages say ``"cpu_bf16": true``: under the default ``precision="auto"``
they run in bf16 on a CPU that computes it natively (AVX512-BF16 or AMX), the other networks in
fp32.  This measures what that costs and buys on the dev splits the packages were chosen on:
sentiment_analysis ``mode="accurate"`` on the five dev splits (reviews, and SMP2020's polar
posts), reading_comprehension ``mode="accurate"`` on CMRC 2018 dev (the default call's answer),
each through ``Taskflow`` with ``precision="fp32"`` and with the default, one process, a warm-up
call first, the two passes alternating.  On a CPU without native bf16 the default is fp32 and there
is nothing to measure: the script says so and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/): the split readers
from common import cpu_kind, load_note, machine, quiet_load, table, update_section  # noqa: E402

SENTIMENT_DEV = [("ChnSentiCorp dev", "chnsenticorp/dev.tsv"),
                 ("online_shopping_10_cats dev", "online_shopping_10_cats/dev.tsv"),
                 ("waimai_10k dev", "waimai_10k/dev.tsv"),
                 ("SMP2020 usual dev (polar rows)", "smp2020_ewect/usual/dev.tsv"),
                 ("SMP2020 virus dev (polar rows)", "smp2020_ewect/virus/dev.tsv")]
PRECISIONS = ("fp32", "auto")


def passes(flows: dict, inputs: list, rounds: int) -> dict:
    """``{precision: (outputs, seconds of its fastest pass)}``: a warm-up call each, then
    ``rounds`` passes over ``inputs`` alternating between the precisions."""
    for flow in flows.values():
        flow(inputs[:8])
    best, outputs = {p: float("inf") for p in PRECISIONS}, {}
    for _ in range(rounds):
        for precision, flow in flows.items():
            start = time.perf_counter()
            outputs[precision] = flow(inputs)
            best[precision] = min(best[precision], time.perf_counter() - start)
    return {p: (outputs[p], best[p]) for p in PRECISIONS}


def encoder_names(flow) -> str:
    """The networks of a flow that the default runs in bf16 here (their predictors say so)."""
    from taskflow.predictor import Precision

    seen, stack = [], [flow.task.model]
    while stack:
        model = stack.pop()
        stack += list(model.requires.values())
        if model.predictor_options().precision is Precision.BF16:
            seen.append(f"`{model.name}` {model.version}")
    return ", ".join(sorted(set(seen))) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the shared data folder (sentiment/ and mrc/cmrc2018/ under it)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating passes per precision (the fastest timed)")
    parser.add_argument("--limit", type=int, help="first N texts and questions of each split (trials; not written)")
    args = parser.parse_args()

    from taskflow import Taskflow
    from taskflow.predictor import native_bf16

    if not native_bf16():
        raise SystemExit("this CPU does not compute bf16 natively (no avx512_bf16 or amx_bf16 flag): precision='auto' "
                         "is fp32 everywhere here, nothing to compare")
    from recipes.sentiment_analysis.train import read_split
    from taskflow.tasks.reading_comprehension.metrics import evaluate
    from taskflow.tasks.reading_comprehension.squad import read_squad

    data = Path(args.data)
    load = quiet_load()
    rows, seconds, texts_all = [], {p: 0.0 for p in PRECISIONS}, 0
    sentiment_flows = {p: Taskflow("sentiment_analysis", mode="accurate", precision=p, offline=True)
                       for p in PRECISIONS}
    for label, rel in SENTIMENT_DEV:
        texts, labels = read_split(data / "sentiment", rel)
        texts, labels = texts[: args.limit], labels[: args.limit]
        made = passes(sentiment_flows, texts, args.rounds)
        names = sentiment_flows["fp32"].task.labels
        accuracy = {p: sum(o["label"] == names[y] for o, y in zip(made[p][0], labels)) / len(labels) for p in PRECISIONS}
        changed = sum(a["label"] != b["label"] for a, b in zip(made["fp32"][0], made["auto"][0]))
        rows.append([f"sentiment accurate, {label}", len(texts), f"{accuracy['fp32']:.4f}", f"{accuracy['auto']:.4f}",
                     f"{100 * (accuracy['auto'] - accuracy['fp32']):+.2f}", changed])
        for p in PRECISIONS:
            seconds[p] += made[p][1]
        texts_all += len(texts)
    sentiment_speed = {p: texts_all / seconds[p] for p in PRECISIONS}
    sentiment_bf16 = encoder_names(sentiment_flows["auto"])

    squad = read_squad(data / "mrc" / "cmrc2018" / "dev.json")[: args.limit]
    questions = [{"context": r["context"], "question": r["question"]} for r in squad]
    mrc_flows = {p: Taskflow("reading_comprehension", mode="accurate", precision=p, offline=True) for p in PRECISIONS}
    made = passes(mrc_flows, questions, args.rounds)
    references = [r["answers"] for r in squad]
    scores = {p: evaluate(references, [o["answer"] for o in made[p][0]]) for p in PRECISIONS}
    changed = sum(a["answer"] != b["answer"] for a, b in zip(made["fp32"][0], made["auto"][0]))
    rows.append(["reading_comprehension accurate, CMRC 2018 dev F1", len(squad), f"{scores['fp32']['f1']:.1f}",
                 f"{scores['auto']['f1']:.1f}", f"{scores['auto']['f1'] - scores['fp32']['f1']:+.1f}", changed])
    rows.append(["reading_comprehension accurate, CMRC 2018 dev EM", len(squad), f"{scores['fp32']['em']:.1f}",
                 f"{scores['auto']['em']:.1f}", f"{scores['auto']['em'] - scores['fp32']['em']:+.1f}", ""])
    mrc_speed = {p: len(squad) / made[p][1] for p in PRECISIONS}
    mrc_bf16 = encoder_names(mrc_flows["auto"])

    speed = table(["mode", "fp32", "auto (bf16 encoder)", "auto / fp32"], [
        ["sentiment accurate, texts/s (the five dev splits)", f"{sentiment_speed['fp32']:,.1f}",
         f"{sentiment_speed['auto']:,.1f}", f"{sentiment_speed['auto'] / sentiment_speed['fp32']:.2f}x"],
        ["reading_comprehension accurate, questions/s (CMRC dev)", f"{mrc_speed['fp32']:,.1f}",
         f"{mrc_speed['auto']:,.1f}", f"{mrc_speed['auto'] / mrc_speed['fp32']:.2f}x"]])
    body = (f"Machine: {machine()}; {load_note(load)}. Under `precision=\"auto\"` (the default) these networks ran "
            f"in bf16: sentiment {sentiment_bf16}; reading_comprehension {mrc_bf16}; every other network in fp32. "
            f"Through `Taskflow(..., mode=\"accurate\")` with `precision=\"fp32\"` and with the default, one process, "
            f"{args.rounds} alternating passes each (the fastest timed). Command: `OMP_NUM_THREADS=2 python "
            f"benchmarks/accuracy_bf16.py --data ../shared/data`.\n\n"
            + table(["dev split", "n", "fp32", "auto", "difference (points)", "answers changed"], rows)
            + "\n\n" + speed)
    print(body)
    if not args.limit:
        key, label = cpu_kind()
        update_section(f"bf16_{key}", f"## The accurate modes in bf16 ({label})\n\n" + body)


if __name__ == "__main__":
    main()
