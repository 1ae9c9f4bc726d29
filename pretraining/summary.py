"""Markdown tables for the README, from what the runs wrote (nothing typed in by hand).

    python -m pretraining.summary curve pretraining/runs/base --points 12
    python -m pretraining.summary pilot pretraining/runs/mlm_4x256=pretraining/runs/mrc_4x256 \\
        pretraining/runs/mlm_6x384=pretraining/runs/mrc_6x384 ...

``curve``: the loss curve of one run (``RUN/loss.jsonl``) at about ``--points`` evenly spaced steps:
training loss (the mean over the log window), held-out loss where a save evaluated it, tokens and
minutes.  ``pilot``: one row per pretraining run (``RUN/checkpoint.pt``), with the reading-
comprehension package fine-tuned from it (``RUN=PACKAGE``): size, objective, masking, tokens,
minutes, last held-out loss, selection F1/EM and answer lengths.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def read_log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "loss.jsonl").read_text(encoding="utf-8").splitlines() if line]


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def curve(run: Path, points: int) -> str:
    records = read_log(run)
    training = [r for r in records if "loss" in r]
    evals = {r["step"]: r for r in records if "eval_loss" in r}
    if not training:
        raise SystemExit(f"{run / 'loss.jsonl'} has no training lines yet")
    stride = max(1, len(training) // points)
    chosen = training[stride - 1::stride]
    if chosen[-1] is not training[-1]:
        chosen.append(training[-1])
    rows = []
    for record in chosen:
        held_out = evals.get(record["step"], {}).get("eval_loss", "")
        rows.append([record["step"], f"{record['tokens'] / 1e6:.1f}M", record["minutes"], record["loss"],
                     record.get("mlm_accuracy", record.get("detection_accuracy", "")), held_out])
    note = "; ".join(f"step {s}: held-out loss {r['eval_loss']}" for s, r in sorted(evals.items()))
    return table(["step", "tokens", "minutes", "train loss", "accuracy", "held-out loss"], rows) + \
        (f"\n\nHeld-out evaluations (at each save): {note}." if note else "")


def pilot(pairs: list[str]) -> str:
    import torch

    rows = []
    for pair in pairs:
        run, _, package = pair.partition("=")
        checkpoint = torch.load(Path(run) / "checkpoint.pt", map_location="cpu", weights_only=True)
        encoder, args = checkpoint["config"]["encoder"], checkpoint["args"]
        evals = [r for r in read_log(Path(run)) if "eval_loss" in r]
        selection = {}
        if package:
            manifest = json.loads((Path(package) / "manifest.json").read_text(encoding="utf-8"))
            selection = manifest["metrics"]["selection"]
        parameters = sum(v.numel() for k, v in checkpoint["model"].items() if k.startswith("encoder."))
        rows.append([Path(run).name, f"{encoder['num_layers']} x {encoder['hidden_size']}", f"{parameters / 1e6:.1f}M",
                     checkpoint["config"]["objective"], args.get("segmenter") or "chars", f"{checkpoint['tokens'] / 1e6:.0f}M",
                     round(checkpoint["train_seconds"] / 60, 1), evals[-1]["eval_loss"] if evals else "",
                     selection.get("f1", ""), selection.get("em", ""),
                     f"{selection.get('mean_answer_len', '')} / {selection.get('mean_gold_len', '')}" if selection else ""])
    # The held-out loss is each objective's own (ELECTRA's adds 50 x detection), so only the
    # fine-tuned selection score compares runs of different objectives.
    return table(["run", "size", "parameters", "objective", "masking", "tokens", "minutes", "held-out loss",
                  "select F1", "select EM", "answer len / gold"], rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("curve", help="one run's loss curve")
    one.add_argument("run", help="a pretraining --out folder")
    one.add_argument("--points", type=int, default=12)
    many = commands.add_parser("pilot", help="one row per run")
    many.add_argument("runs", nargs="+", help="RUN or RUN=SPAN_PACKAGE")
    args = parser.parse_args(argv)
    print(curve(Path(args.run), args.points) if args.command == "curve" else pilot(args.runs))


if __name__ == "__main__":
    main()
