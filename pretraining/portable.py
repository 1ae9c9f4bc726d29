"""Carry a pretraining checkpoint from one machine to the next.

    python -m pretraining.portable pack pretraining/runs/base/checkpoint.pt $OUT/base      # on the GPU machine
    python -m pretraining.portable unpack pretraining/runs/base_portable pretraining/runs/base/checkpoint.pt

A full checkpoint (weights and AdamW's two moments in float32: about 170 MB for 6 x 384) cannot
leave the GPU machine, whose calls return at most 8 files of 16 MiB (64 MiB in all), nor travel
back beside the repository (64 MiB per call, the repository itself about 40 MB).  ``pack`` keeps
what continues the run and little else: the weights in float16, the step, the schedule, the data
position, the generators' states, the settings and the vocabulary; not the optimizer's moments.
It writes the result in pieces of at most ``--max-mib`` MiB and a ``portable.json`` naming them
with their sha256, so the pieces can come back in one call and go out again over several.
``unpack`` joins and checks them.

Resuming from a packed checkpoint is not exact (``pretrain.py`` says so): AdamW starts with empty
moments, so its learning rate is warmed up again over ``--rewarm-steps`` steps from where the run
stands on its schedule.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
from pathlib import Path

import torch

INDEX = "portable.json"


def reduce(checkpoint: dict) -> dict:
    """The checkpoint without the optimizer's moments, floating-point weights in float16.

    Weights equal under two names (the MLM head's output matrix is the input embedding, tied) become
    one tensor, which ``torch.save`` stores once: ``half()`` makes a new tensor per name, and a tie
    broken so cost 5.8 MB of a 6 x 384 checkpoint's 33.8."""
    model, halves = {}, []
    for name, tensor in checkpoint["model"].items():
        if tensor.is_floating_point():
            tensor = tensor.half()
            tensor = next((h for h in halves if h.shape == tensor.shape and torch.equal(h, tensor)), tensor)
            halves.append(tensor)
        model[name] = tensor
    return {**{k: v for k, v in checkpoint.items() if k not in ("model", "optimizer")}, "model": model,
            "portable": True}


def pack(checkpoint_path: str | Path, out_dir: str | Path, max_mib: float = 15.0) -> list[Path]:
    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
    buffer = io.BytesIO()
    torch.save(reduce(checkpoint), buffer)
    data = buffer.getvalue()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    size = max(1, int(max_mib * 2**20))
    pieces = []
    for number, begin in enumerate(range(0, len(data), size)):
        piece = out_dir / f"checkpoint.{number:03d}"
        piece.write_bytes(data[begin:begin + size])
        pieces.append(piece)
    index = {"step": checkpoint["step"], "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
             "pieces": [{"name": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in pieces]}
    (out_dir / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return pieces


def joined(in_dir: str | Path) -> bytes:
    """The packed checkpoint's bytes, every piece and the whole checked against its index."""
    in_dir = Path(in_dir)
    index = json.loads((in_dir / INDEX).read_text(encoding="utf-8"))
    parts = []
    for entry in index["pieces"]:
        data = (in_dir / entry["name"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise SystemExit(f"{in_dir / entry['name']} is damaged (sha256 differs from {INDEX}); copy it again")
        parts.append(data)
    data = b"".join(parts)
    if hashlib.sha256(data).hexdigest() != index["sha256"]:
        raise SystemExit(f"the pieces in {in_dir} do not make the checkpoint {INDEX} names")
    return data


def load(path: str | Path) -> dict:
    """A checkpoint from a packed folder or a ``checkpoint.pt``."""
    path = Path(path)
    source = io.BytesIO(joined(path)) if path.is_dir() else path
    return torch.load(source, map_location="cpu", weights_only=True)


def unpack(in_dir: str | Path, checkpoint_path: str | Path) -> None:
    data = joined(in_dir)
    checkpoint_path = Path(checkpoint_path)
    checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint_path.with_name(f".{checkpoint_path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, checkpoint_path)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="checkpoint -> pieces")
    packing.add_argument("checkpoint")
    packing.add_argument("out_dir")
    packing.add_argument("--max-mib", type=float, default=15.0, help="largest piece (the GPU calls return <= 16 MiB a file)")
    unpacking = commands.add_parser("unpack", help="pieces -> checkpoint")
    unpacking.add_argument("in_dir")
    unpacking.add_argument("checkpoint")
    args = parser.parse_args(argv)
    if args.command == "pack":
        pieces = pack(args.checkpoint, args.out_dir, args.max_mib)
        total = sum(p.stat().st_size for p in pieces)
        print(f"{args.out_dir}: {len(pieces)} pieces, {total / 2**20:.1f} MiB")
    else:
        unpack(args.in_dir, args.checkpoint)
        print(f"wrote {args.checkpoint}")


if __name__ == "__main__":
    main()
