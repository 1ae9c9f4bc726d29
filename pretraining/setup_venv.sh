#!/usr/bin/env bash
# The PyTorch environment for the recipe and its test: .venv-torch (ignored by git), with a CPU
# build of torch, this project (editable), Paddle 3 (the recipe test converts and runs in Paddle)
# and jieba (whole-word masking).  Not part of tests/run.sh: see pretraining/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_CPU=${TORCH_CPU:-"torch==2.13.0+cpu"}

[ -x .venv-torch/bin/python ] || "$PYTHON" -m venv .venv-torch
if ! .venv-torch/bin/python -c "import torch" 2>/dev/null; then
    # PyPI's Linux torch is the CUDA build (with its nvidia-* wheels, several GB); a "+cpu" build
    # comes from pip's find-links folder where the machine has one, or from PyTorch's CPU wheel
    # index (pass it as PIP_EXTRA_INDEX_URL).
    .venv-torch/bin/python -m pip install -q --disable-pip-version-check "$TORCH_CPU"
fi
.venv-torch/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" "paddlepaddle>=3,<4" jieba
.venv-torch/bin/python -c "import torch, paddle; print('torch', torch.__version__, '| paddle', paddle.__version__)"
