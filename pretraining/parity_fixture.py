"""Write ``tests/fixtures/encoder_parity.npz``: a tiny random encoder, a few inputs, PyTorch's outputs.

    python -m pretraining.parity_fixture            # rewrite it after changing either network

``tests/test_encoder.py`` loads the weights into the Paddle networks and checks that they give these
outputs to 1e-4, without PyTorch (CI has none).  The span extractor's head is in the fixture too.
Inputs carry padding (id 0) of different lengths, and ids span the whole vocabulary.

Keys: ``config`` (JSON of the architecture), ``input_ids`` [B, T], ``hidden`` [B, T, H], ``start`` and
``end`` [B, T], and the span extractor's weights as ``weights/<name>`` (the encoder's, and ``span.*`` for its
head), laid out as ``convert.paddle_arrays`` writes them.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np
import torch

from .convert import paddle_arrays
from .model import EncoderConfig, SpanExtractor

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "encoder_parity.npz"
CONFIG = EncoderConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, ffn_size=64, max_len=24, dropout=0.1)


def build(seed: int = 7) -> dict[str, np.ndarray]:
    torch.manual_seed(seed)
    model = SpanExtractor(CONFIG).eval()
    # BERT's initialisation (std 0.02) makes every layer nearly the identity; larger weights and
    # non-trivial norms and biases make the check see every parameter.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.copy_(1 + 0.3 * torch.randn_like(parameter))
            else:
                parameter.copy_(0.3 * torch.randn_like(parameter))
    rng = np.random.default_rng(seed)
    lengths = [CONFIG.max_len, 17, 9, 1]
    input_ids = np.zeros((len(lengths), CONFIG.max_len), dtype=np.int64)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = rng.integers(1, CONFIG.vocab_size, size=length)
    with torch.no_grad():
        ids = torch.from_numpy(input_ids)
        hidden = model.encode(ids)
        start, end = model(ids)
    arrays = {"config": np.array(json.dumps(CONFIG.architecture())), "input_ids": input_ids,
              "hidden": hidden.numpy(), "start": start.numpy(), "end": end.numpy()}
    arrays.update({f"weights/{k}": v for k, v in paddle_arrays(model).items()})
    return arrays


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(FIXTURE))
    args = parser.parse_args(argv)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **build())
    Path(args.out).write_bytes(buffer.getvalue())
    print(f"wrote {args.out} ({len(buffer.getvalue())} bytes)")


if __name__ == "__main__":
    main()
