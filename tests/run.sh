#!/usr/bin/env bash
# The test suite, on both Paddle API levels this project supports:
#   .venv-paddle3: paddlepaddle 3.x, PyPI's CPU build (PIR, .json programs);
#   .venv-paddle2: paddlepaddle 2.6.2, the API level of PyPI's paddlepaddle-gpu
#                  (.pdmodel programs; it segfaults with numpy 2, so numpy<2 and protobuf<4).
# Creates the two virtual environments on first use. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

setup() {
    local dir=$1 extras=$2; shift 2
    [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" -e ".[$extras]"
}

# Ray runs in the Paddle 3 environment only (its tests skip where Ray is absent).
setup .venv-paddle3 test,ray "paddlepaddle>=3,<4"
setup .venv-paddle2 test "paddlepaddle==2.6.2" "numpy<2" "protobuf<4"

status=0
echo "== paddlepaddle $(.venv-paddle3/bin/python -c 'import importlib.metadata as m; print(m.version("paddlepaddle"))')"
.venv-paddle3/bin/python -m pytest "$@" || status=$?
echo "== paddlepaddle $(.venv-paddle2/bin/python -c 'import importlib.metadata as m; print(m.version("paddlepaddle"))')"
.venv-paddle2/bin/python -m pytest "$@" || status=$?
exit $status
