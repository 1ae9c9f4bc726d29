#!/usr/bin/env bash
# The test suite, on both Paddle API levels this project supports:
#   .venv-paddle3: paddlepaddle 3.x, PyPI's CPU build (PIR, .json programs);
#   .venv-paddle2: paddlepaddle 2.6.2, the API level of PyPI's paddlepaddle-gpu
#                  (.pdmodel programs; it segfaults with numpy 2, so numpy<2 and protobuf<4).
#                  Its wheels are for CPython 3.8 to 3.12: on a Python pip finds none for (3.13...),
#                  that suite is skipped with one line, and the exit status is the Paddle 3 suite's.
# Creates the two virtual environments on first use. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PADDLE2="paddlepaddle==2.6.2"

setup() {
    local dir=$1 extras=$2; shift 2
    [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" -e ".[$extras]"
}

version() {   # the paddlepaddle a virtual environment holds, or nothing
    "$1/bin/python" -c 'import importlib.metadata as m; print(m.version("paddlepaddle"))' 2>/dev/null || true
}

# Whether pip finds a paddlepaddle 2.6.2 wheel for this environment's Python (the download lands in
# pip's cache, where the install finds it). Any other pip failure, such as no network, stops the
# script with pip's words, rather than skipping the suite for a reason that is not true.
has_paddle2_wheel() {
    local python=$1 scratch status=0
    scratch=$(mktemp -d)
    "$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: "$PADDLE2" \
        -d "$scratch/wheels" >"$scratch/pip.log" 2>&1 || status=$?
    if [ "$status" -ne 0 ] && ! grep -q "No matching distribution found" "$scratch/pip.log"; then
        cat "$scratch/pip.log" >&2
        rm -rf "$scratch"
        exit "$status"
    fi
    rm -rf "$scratch"
    return "$status"
}

# Ray runs in the Paddle 3 environment only (its tests skip where Ray is absent); the server in both.
setup .venv-paddle3 test,ray,serve "paddlepaddle>=3,<4"
paddle2=yes
[ -x .venv-paddle2/bin/python ] || "$PYTHON" -m venv .venv-paddle2
if [ "$(version .venv-paddle2)" = "${PADDLE2#*==}" ] || has_paddle2_wheel .venv-paddle2/bin/python; then
    setup .venv-paddle2 test,serve "$PADDLE2" "numpy<2" "protobuf<4"
else
    paddle2=
fi

status=0
echo "== paddlepaddle $(version .venv-paddle3)"
.venv-paddle3/bin/python -m pytest "$@" || status=$?
if [ -n "$paddle2" ]; then
    echo "== paddlepaddle $(version .venv-paddle2)"
    .venv-paddle2/bin/python -m pytest "$@" || status=$?
else
    echo "== paddlepaddle ${PADDLE2#*==}: skipped: pip has no wheel of it for Python" \
         "$(.venv-paddle2/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
         "(it has them for 3.8 to 3.12); the exit status is the Paddle 3 suite's"
fi
exit $status
