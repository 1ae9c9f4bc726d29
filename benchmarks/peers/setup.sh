#!/usr/bin/env bash
# The peers venv for benchmarks/bench_lexical_peers.py: Baidu's LAC and pkuseg, which do not
# install beside the project's Paddle 3.  Makes benchmarks/peers/.venv (ignored by .gitignore's
# `.venv*/`), installs pinned versions, and checks that each peer imports and runs on one sentence.
#
#     bash benchmarks/peers/setup.sh            # PEERS_PYTHON=/path/to/python3.8 to pick the interpreter
#                                               # (and LAC_PYTHON for the .venv-lac one, default python3)
#     PKUSEG_POSTAG_ZIP=/path/to/postag.zip bash benchmarks/peers/setup.sh   # pkuseg's POS model, offline
#
# What was tried, and why it is this way (2026-11-23):
# - LAC 2.1.2 (the newest; a 64 MB sdist with its models) does `import paddle.fluid` and uses
#   fluid.core.AnalysisConfig / create_paddle_predictor / PaddleTensor with LoD.  paddle.fluid is
#   gone from Paddle 2.6, so LAC needs Paddle <= 2.5.  PyPI no longer serves paddlepaddle 2.0-2.5
#   for any Python: `pip download paddlepaddle==2.5.2` (or 2.4.2) on Python 3.9 lists only 2.6.2
#   and 3.x; on 3.8 it lists 1.8.5, 2.6.2, 3.0.x; on 3.7 only 1.8.5.  Paddle's own mirrors
#   (paddlepaddle.org.cn, paddle-wheel.bj.bcebos.com, mirror.baidu.com) are not reachable from here.
#   So: Python 3.8 + paddlepaddle 1.8.5, the Paddle LAC 2.x was written for.
# - paddlepaddle 1.8.5 pulls the newest protobuf, whose C++ descriptors break its generated
#   *_pb2 modules ("Descriptors cannot be created directly"): protobuf is pinned to 3.20.3.
# - numpy 1.23.5 (the last numpy with 3.8 wheels that paddle 1.8.5 and scipy 1.10 accept).
# - pkuseg 0.0.25 is an sdist whose setup.py imports numpy and Cython: they go in first and it
#   builds with --no-build-isolation (Cython < 3: 0.29.37).  LAC also installs with
#   --no-build-isolation --no-deps (its setup.py declares no requirements; paddle is already here).
# - pkuseg's segmentation model ships in the sdist, but postag=True downloads postag.zip from
#   GitHub releases (github.com/lancopku/pkuseg-python/releases/download/v0.0.16/postag.zip) on
#   first use.  This script tries that download (sha256 checked) or takes PKUSEG_POSTAG_ZIP; where
#   neither works, runner.py runs pkuseg without postag and the benchmark's table says so.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PY="${PEERS_PYTHON:-/root/.pyenv/versions/3.8.18/bin/python}"
POSTAG_URL="https://github.com/lancopku/pkuseg-python/releases/download/v0.0.16/postag.zip"
POSTAG_SHA256="afdf15f4e39bc47a39be4c37e3761b0c8f6ad1783f3cd3aff52984aebc0a1da9"
PKUSEG_HOME="$VENV/pkuseg_home"

if [ ! -x "$PY" ]; then
    echo "no Python at $PY (LAC needs Python 3.7/3.8 for paddlepaddle 1.8.5): set PEERS_PYTHON" >&2
    exit 1
fi
"$PY" -c 'import sys; assert sys.version_info[:2] in ((3, 7), (3, 8)), sys.version' || {
    echo "$PY is not Python 3.7/3.8: PyPI has paddlepaddle 1.8.5 (with paddle.fluid) only for those" >&2
    exit 1
}

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet)

"${PIP[@]}" "numpy==1.23.5" "Cython==0.29.37" "protobuf==3.20.3"
"${PIP[@]}" "paddlepaddle==1.8.5" "numpy==1.23.5" "protobuf==3.20.3" "scipy==1.10.1" "opencv-python==4.2.0.32"
"${PIP[@]}" --no-build-isolation "pkuseg==0.0.25" "numpy==1.23.5"
"${PIP[@]}" --no-build-isolation --no-deps "LAC==2.1.2"

# pkuseg's POS model (optional; see above).
mkdir -p "$PKUSEG_HOME"
if [ ! -d "$PKUSEG_HOME/postag" ]; then
    zip="$PKUSEG_HOME/postag.zip"
    if [ -n "${PKUSEG_POSTAG_ZIP:-}" ]; then
        cp "$PKUSEG_POSTAG_ZIP" "$zip.part"
    elif ! curl -fsSL --max-time 120 -o "$zip.part" "$POSTAG_URL"; then
        echo "pkuseg postag model: download from $POSTAG_URL failed; pkuseg will run without postag" >&2
        rm -f "$zip.part"
    fi
    if [ -f "$zip.part" ]; then
        if echo "$POSTAG_SHA256  $zip.part" | sha256sum -c --quiet -; then
            mv "$zip.part" "$zip"
            "$VENV/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$zip" "$PKUSEG_HOME/postag"
        else
            echo "pkuseg postag model: sha256 mismatch, not used" >&2
            rm -f "$zip.part"
        fi
    fi
fi

# LAC as its users can install it today: paddlepaddle 2.6.2 on this project's Python, with
# paddle.fluid aliased to paddle.base by runner.py; much faster than on 1.8.5.  Also the recipe's teacher
# (tasks/lexical_analysis/lac_labels.py).
LAC_VENV="$HERE/.venv-lac"
[ -x "$LAC_VENV/bin/python" ] || "${LAC_PYTHON:-python3}" -m venv "$LAC_VENV"
"$LAC_VENV/bin/python" -m pip install --quiet paddlepaddle==2.6.2 "numpy<2" "protobuf<4" "setuptools<70" wheel
"$LAC_VENV/bin/python" -m pip install --quiet --no-build-isolation "LAC==2.1.2"

# Each peer imports and runs on one sentence.
sentence="$(mktemp)"
trap 'rm -f "$sentence"' EXIT
echo "百度是一家高科技公司，我们在北京上班。" > "$sentence"
status=0
for engine in lac lac2 pkuseg; do
    if out="$("$VENV/bin/python" "$HERE/runner.py" --engine "$engine" --texts "$sentence" --seconds 0 --rounds 1 2>/dev/null)"; then
        echo "$out" | "$VENV/bin/python" -c 'import json, sys; r = json.load(sys.stdin); print("ok", r["engine"], r["info"], r["words"][0], r["tags"][0])'
    else
        echo "FAILED $engine: $out" >&2
        status=1
    fi
done
if out="$("$LAC_VENV/bin/python" "$HERE/runner.py" --engine lac2 --texts "$sentence" --seconds 0 --rounds 1 2>/dev/null)"; then
    echo "$out" | "$LAC_VENV/bin/python" -c 'import json, sys; r = json.load(sys.stdin); print("ok lac on", r["info"]["paddlepaddle"], r["words"][0], r["tags"][0])'
else
    echo "FAILED lac on paddlepaddle 2.6.2: $out" >&2
    status=1
fi
exit $status
