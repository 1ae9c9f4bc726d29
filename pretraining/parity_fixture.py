"""Write ``tests/fixtures/encoder_parity.npz``: a tiny random encoder, a few inputs, PyTorch's outputs.

    python -m pretraining.parity_fixture                  # rewrite it after changing either network
    python -m pretraining.parity_fixture --sources-only   # re-pin the PyTorch sources' hashes (no PyTorch)

``tests/test_encoder.py`` loads the weights into the Paddle networks and checks that they give these
outputs to 1e-4, without PyTorch (CI has none).  The span extractor's head is in the fixture too.
Inputs carry padding (id 0) of different lengths, and ids span the whole vocabulary.

The fixture also pins the sha256 of the PyTorch side it was made from (:data:`SOURCES`), so that
where PyTorch is not installed a change there still turns the tests red until the fixture is
written again.  ``--sources-only`` re-pins those hashes and keeps every array as it is: only for a
change that cannot change what the networks compute (a comment, a docstring, code the fixture does
not run); any other change needs the full rewrite, where PyTorch is installed (pretraining/README.md).

Keys: ``config`` (JSON of the architecture), ``input_ids`` [B, T], ``hidden`` [B, T, H], ``start`` and
``end`` [B, T], the span extractor's weights as ``weights/<name>`` (the encoder's, and ``span.*`` for its
head), laid out as ``convert.paddle_arrays`` writes them, and ``sources`` (JSON: path -> sha256).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "encoder_parity.npz"
# What the fixture's outputs come from: the PyTorch networks and the weight layout they are stored in.
SOURCES = ("pretraining/model.py", "pretraining/convert.py")


def source_hashes() -> dict[str, str]:
    """``{path: sha256}`` of :data:`SOURCES`, line endings made ``\\n`` (a Windows checkout is no change)."""
    return {name: hashlib.sha256((ROOT / name).read_bytes().replace(b"\r\n", b"\n")).hexdigest() for name in SOURCES}


def build(seed: int = 7) -> dict[str, np.ndarray]:
    import torch

    from .convert import paddle_arrays
    from .model import EncoderConfig, SpanExtractor

    config = EncoderConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, ffn_size=64, max_len=24,
                           dropout=0.1)
    torch.manual_seed(seed)
    model = SpanExtractor(config).eval()
    # BERT's initialisation (std 0.02) makes every layer nearly the identity; larger weights and
    # non-trivial norms and biases make the check see every parameter.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.copy_(1 + 0.3 * torch.randn_like(parameter))
            else:
                parameter.copy_(0.3 * torch.randn_like(parameter))
    rng = np.random.default_rng(seed)
    lengths = [config.max_len, 17, 9, 1]
    input_ids = np.zeros((len(lengths), config.max_len), dtype=np.int64)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = rng.integers(1, config.vocab_size, size=length)
    with torch.no_grad():
        ids = torch.from_numpy(input_ids)
        hidden = model.encode(ids)
        start, end = model(ids)
    arrays = {"config": np.array(json.dumps(config.architecture())), "input_ids": input_ids,
              "hidden": hidden.numpy(), "start": start.numpy(), "end": end.numpy()}
    arrays.update({f"weights/{k}": v for k, v in paddle_arrays(model).items()})
    return arrays


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(FIXTURE))
    parser.add_argument("--sources-only", action="store_true",
                        help="re-pin the sources' sha256 in the existing fixture, keeping its arrays (no PyTorch)")
    args = parser.parse_args(argv)
    if args.sources_only:
        with np.load(args.out) as stored:
            arrays = {name: stored[name] for name in stored.files}
    else:
        arrays = build()
    arrays["sources"] = np.array(json.dumps(source_hashes(), sort_keys=True))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    Path(args.out).write_bytes(buffer.getvalue())
    print(f"wrote {args.out} ({len(buffer.getvalue())} bytes)")


if __name__ == "__main__":
    main()
