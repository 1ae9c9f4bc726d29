#!/usr/bin/env bash
# What a GPU call carries beside the repository, built on the CPU in one command, and the moves that
# keep the repository itself small enough to travel with it (a call carries 64 MiB in all).
#
#   bash pretraining/prepare_call.sh build      # .gpu/call: ckpt/, data.tar.xz, whl/, shards/
#   bash pretraining/prepare_call.sh hold       # resources/ and pretraining/checkpoints/ out of the tree
#   bash pretraining/prepare_call.sh restore    # and back, once the calls are done
#
# build makes, under .gpu/call (ignored by git):
#   ckpt/          the packed checkpoint to start from (CHECKPOINT; default the last packed one in the
#                  tree by name, mlm_6x384_34k today);
#   data.tar.xz    a folder named data with what gpu_finetune.sh fine-tunes and scores on: CMRC 2018,
#                  the sentiment sets, the matching sets with OCNLI (train and dev splits; test splits
#                  too, as the scripts report on them; never trained on);
#   whl/           OpenCC for the GPU machine's Python (PY_GPU, default 3.12), which reaches no index;
#   shards/        corpus parts as token-id shards (shards.py) for `CORPUS=.gpu/call/shards/*.u16.xz`:
#                  PARTS names them, "labelled" being the labelled sets' train text (labelled.py).
# It stops with the sizes when the call would pass CARRY_MIB (60: the limit less a margin), counting
# the repository's tracked files outside the held folders.  The shards need taskflow and torch (the
# checkpoint holds the vocabulary): PY, default .venv-torch's (pretraining/setup_venv.sh makes it).
# Every input comes from ../shared/data (SHARED).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared/data}
PY=${PY:-.venv-torch/bin/python}
CALL=.gpu/call
HOLD=${HOLD:-../hold}
HELD="resources pretraining/checkpoints"
CARRY_MIB=${CARRY_MIB:-60}

mib() { du -sm "$@" | awk '{s += $1} END {print s + 0}'; }

# The tracked files that travel with a call, in MiB: everything outside the held folders.
repo_mib() {
    git ls-files -z -- . ':!resources' ':!pretraining/checkpoints' |
        xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {printf "%d\n", s / 1048576 + 1}'
}

build() {
    local checkpoint=${CHECKPOINT:-$(dirname "$(ls pretraining/checkpoints/*/portable.json | sort -V | tail -1)")}
    local parts=${PARTS-"labelled web_misc xwlb.01"}
    [ -f "$checkpoint/portable.json" ] || { echo "not a packed checkpoint: $checkpoint" >&2; exit 2; }
    [ -d "$SHARED/mrc/cmrc2018" ] || { echo "no shared data at $SHARED (set SHARED)" >&2; exit 2; }
    rm -rf "$CALL" && mkdir -p "$CALL/whl" "$CALL/shards"
    cp -r "${checkpoint%/}" "$CALL/ckpt"
    echo "ckpt: $checkpoint ($(mib "$CALL/ckpt") MiB)"

    local scratch
    scratch=$(mktemp -d)
    mkdir -p "$scratch/data"
    for folder in mrc/cmrc2018 sentiment matching; do
        mkdir -p "$scratch/data/$(dirname "$folder")"
        cp -r "$SHARED/$folder" "$scratch/data/$folder"
    done
    find "$scratch/data" -name README.md -delete
    tar cJf "$CALL/data.tar.xz" -C "$scratch" data
    rm -rf "$scratch"
    echo "data.tar.xz: $(mib "$CALL/data.tar.xz") MiB"

    "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version "${PY_GPU:-3.12}" --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        opencc -d "$CALL/whl"
    echo "whl: $(ls "$CALL/whl")"

    local sources=() name
    for name in $parts; do
        if [ "$name" = labelled ]; then
            "$PY" -m pretraining.labelled --data "$SHARED" --out "$CALL/labelled_train.txt.gz"
            sources+=("$CALL/labelled_train.txt.gz")
        else
            [ -f "$SHARED/corpus/$name.txt.gz" ] || { echo "no corpus part $name in $SHARED/corpus" >&2; exit 2; }
            sources+=("$SHARED/corpus/$name.txt.gz")
        fi
    done
    if [ ${#sources[@]} -gt 0 ]; then
        "$PY" -m pretraining.shards --corpus "${sources[@]}" --checkpoint "$CALL/ckpt" --out "$CALL/shards"
    fi
    rm -f "$CALL/labelled_train.txt.gz"

    local carried repo
    carried=$(mib "$CALL")
    repo=$(repo_mib)
    echo "$CALL: $carried MiB; the repository outside $HELD: $repo MiB; in all $((carried + repo)) of $CARRY_MIB MiB"
    if [ $((carried + repo)) -gt "$CARRY_MIB" ]; then
        echo "too much for one call: carry fewer PARTS (now: $parts), or the shards over several calls" >&2
        exit 1
    fi
}

hold() {
    local folder
    for folder in $HELD; do
        [ -e "$HOLD/$folder" ] && { echo "$HOLD/$folder exists already: restore first" >&2; exit 1; }
    done
    for folder in $HELD; do
        mkdir -p "$HOLD/$(dirname "$folder")" && mv "$folder" "$HOLD/$folder"
    done
    echo "held in $HOLD: $HELD (bash pretraining/prepare_call.sh restore puts them back)"
}

restore() {
    local folder
    for folder in $HELD; do
        if [ -e "$HOLD/$folder" ]; then
            [ -e "$folder" ] && { echo "$folder is in the tree and in $HOLD: move one aside by hand" >&2; exit 1; }
            mv "$HOLD/$folder" "$folder"
        fi
    done
    git status --short -- $HELD | head -5
    echo "restored: $HELD"
}

case "${1:-}" in
build) build ;;
hold) hold ;;
restore) restore ;;
*) echo "usage: bash pretraining/prepare_call.sh build|hold|restore" >&2; exit 2 ;;
esac
