"""A pretraining checkpoint -> a taskflow model package that Paddle runs.

    python -m pretraining.convert runs/base/checkpoint.pt --out resources/encoder/char_base --name char_base

The package holds ``weights.npz`` (the encoder's weights under the Paddle network's names, ``Linear``
weights transposed to Paddle's ``[in, out]``; matrices stored as float16 with ``--float16``, which
``taskflow.weights.load_weights`` reads back as float32), ``vocab.txt`` and ``manifest.json``
(``architecture.type: transformer_encoder`` and its sizes, ``normalization``, how it was
pretrained).  Only the encoder ships: the MLM head, and ELECTRA's generator, are for training.

No Paddle is needed here (the GPU machine has none); the package is written by
``taskflow.packages.write_package``, like every recipe's.
"""

from __future__ import annotations

import argparse
import io
import tempfile
from pathlib import Path

import numpy as np
import torch

from taskflow.encoder import NORMALIZATION, CharVocab
from taskflow.packages import write_package

ENCODER_TYPE = "transformer_encoder"


def paddle_arrays(module: torch.nn.Module, *, float16: bool = False) -> dict[str, np.ndarray]:
    """``module``'s weights as the Paddle twin names and lays them out."""
    linear_weights = {f"{name}.weight" for name, sub in module.named_modules() if isinstance(sub, torch.nn.Linear)}
    arrays = {}
    for name, tensor in module.state_dict().items():
        array = tensor.detach().float().cpu().numpy()
        if name in linear_weights:
            array = np.ascontiguousarray(array.T)
        # Matrices halve well (fp16 keeps 3 significant digits); vectors (norms, biases) are tiny,
        # and a norm's scale is where float16's error would show most.
        arrays[name] = array.astype(np.float16) if float16 and array.ndim >= 2 else array
    return arrays


def write_weights(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path.write_bytes(buffer.getvalue())


def convert(checkpoint_path: str | Path, out: str | Path, *, name: str, version: str = "1.0.0",
            float16: bool = False, task: str = "encoder"):
    """Write the package; returns its :class:`taskflow.manifest.Manifest`."""
    from .model import EncoderConfig, PretrainConfig, Pretrainer

    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
    config = checkpoint["config"]
    pretrain_config = PretrainConfig(EncoderConfig(**config["encoder"]), objective=config["objective"],
                                     generator_fraction=config["generator_fraction"],
                                     discriminator_weight=config["discriminator_weight"])
    model = Pretrainer(pretrain_config)
    model.load_state_dict(checkpoint["model"])
    vocab = CharVocab(checkpoint["vocab"])
    args = checkpoint["args"]
    with tempfile.TemporaryDirectory(prefix="taskflow-encoder-") as scratch:
        scratch = Path(scratch)
        write_weights(scratch / "weights.npz", paddle_arrays(model.encoder, float16=float16))
        vocab.save(scratch / "vocab.txt")
        fields = {
            "task": task, "name": name, "version": version,
            "description": f"char-level transformer encoder (pre-LN), pretrained with {config['objective']}"
                           f"{' + whole-word masking (' + args['segmenter'] + ')' if args.get('segmenter') else ''}",
            "architecture": {"type": ENCODER_TYPE, **pretrain_config.encoder.architecture()},
            "normalization": list(NORMALIZATION),
            "special_tokens": vocab.tokens[:5],
            "pretraining": {
                "objective": config["objective"], "steps": checkpoint["step"], "tokens": checkpoint["tokens"],
                "train_minutes": round(checkpoint["train_seconds"] / 60, 1), "seq_len": args["seq_len"],
                "batch_size": args["batch_size"], "lr": args["lr"], "warmup_steps": args["warmup_steps"],
                "total_steps": args["total_steps"], "mask_rate": args["mask_rate"], "segmenter": args.get("segmenter"),
                "corpus": [Path(p).name for p in args["corpus"]], "seed": args["seed"],
            },
            "weights_dtype": "float16 matrices" if float16 else "float32",
            "framework": {"torch": checkpoint.get("torch", torch.__version__), "numpy": np.__version__},
        }
        return write_package(out, fields, {"weights.npz": scratch / "weights.npz", "vocab.txt": scratch / "vocab.txt"})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a checkpoint.pt written by pretraining.pretrain")
    parser.add_argument("--out", required=True, help="the package folder to write")
    parser.add_argument("--name", help="model name in the manifest (default: the --out folder's name)")
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--float16", action="store_true", help="store matrices as float16 (half the size)")
    args = parser.parse_args(argv)
    manifest = convert(args.checkpoint, args.out, name=args.name or Path(args.out).name, version=args.version,
                       float16=args.float16)
    size = sum(entry["size"] for entry in manifest.files.values())
    print(f"wrote {args.out}: {manifest.name} {manifest.version}, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
