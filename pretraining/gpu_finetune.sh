#!/usr/bin/env bash
# Fine-tune the committed encoder checkpoint on a GPU in one command: the span head (CMRC 2018),
# the sentiment head and the pair cross-encoder, each package packed into 15 MiB pieces under $OUT
# as soon as it is written, while they fit in 60 MiB (what a call brings back); the rest waits in
# $W for the next call.  Runs from the repository root with PyTorch and numpy alone: no install
# (a taskflow/tasks -> ../tasks link stands in for the package mapping), no Paddle, no jieba.
#
#   DATA=.gpu/data.tar.gz WHEELS=".gpu/opencc-*.whl" bash pretraining/gpu_finetune.sh
#
# DATA: a folder (or a .tar.gz of one) holding mrc/cmrc2018/{train,trial,dev}.json,
# sentiment/<set>/{train,dev,test}.tsv and matching/<set>/*.tsv, as ../shared/data does.
# WHEELS: wheels to install first (OpenCC: the encoder's normalisation starts with t2s).
# ONLY: the runs to do, of "pretrain span sentiment similarity" (default the three fine-tunings).
# pretrain resumes CHECKPOINT on CORPUS (corpus parts, .txt.gz) up to step STEPS within MIN_PRETRAIN
# minutes, packs it (portable.py) and brings it back first; the fine-tunings after it start from it.
# Each run's epochs, learning
# rate and time guard: EPOCHS_*, LR_*, MIN_* (see below); the defaults are the runs of 2026-11-27
# (pretraining/README.md, "GPU runs"; similarity stopped by its 2.2-minute guard then).
# SENT_ARGS: more options for the sentiment run, e.g. statements of fact trained towards equal
# probabilities: SENT_ARGS="--augment-kinds invariance,negation,contrast,slang,no_opinion
# --neutral-text DIR/matching/afqmc/train.tsv DIR/matching/bq_corpus/train.tsv".
set -u
PY=${PY:-python3}; W=${W:-/tmp/g}; DEVICE=${DEVICE:-auto}; OUT=${OUT:?set OUT, the folder that comes back}
ONLY=${ONLY:-span sentiment similarity}; CHECKPOINT=${CHECKPOINT:-pretraining/checkpoints/mlm_6x384_28k}
used=0
mkdir -p "$W" "$OUT"
if [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $WHEELS || exit
    export PYTHONPATH=/tmp/site
fi
# Only where taskflow is not installed (the bare GPU machine): a link stands in for the package mapping.
$PY -c "import taskflow.tasks" 2>/dev/null || [ -e taskflow/tasks ] || ln -s ../tasks taskflow/tasks
if [ -f "$DATA" ]; then mkdir -p "$W/data" && tar xzf "$DATA" -C "$W/data" && DATA=$W/data; fi
[ -f "$W/base.pt" ] || $PY -m pretraining.portable unpack "$CHECKPOINT" "$W/base.pt" || exit

bring_back() {   # a package folder in $W: tar, split into 15 MiB pieces, copy out while they fit
    # What a call brings back: 8 files and 64 MiB at most (60 kept, for the logs); a log still to
    # come keeps its place (logs_left), or it would push a piece out.
    [ -d "$W/$1" ] || return 0
    (cd "$W" && tar cf "$1.tar" "$1" && split -b 15M "$1.tar" "$1.tar.")
    local size=$(( $(stat -c %s "$W/$1.tar") / 1048576 + 1 ))
    local files=$(( $(find "$OUT" -type f | wc -l) + $(ls "$W/$1".tar.?? | wc -l) + logs_left ))
    if [ $(( used + size )) -le 60 ] && [ "$files" -le 8 ]; then
        cp "$W/$1".tar.?? "$OUT/" && used=$(( used + size )) && echo "brought back: $1 (${size} MiB)"
    else
        echo "left in $W (over 60 MiB or 8 files this call): $1"
    fi
}
runs() { case " $ONLY " in *" $1 "*) logs_left=$(( logs_left - 1 )); return 0;; *) return 1;; esac; }
logs_left=$(wc -w <<< "$ONLY")   # each run writes one log into $OUT

if runs pretrain; then
    mkdir -p "$W/pretrain" && cp "$W/base.pt" "$W/pretrain/checkpoint.pt"
    $PY -m pretraining.pretrain --resume "$W/pretrain/checkpoint.pt" --corpus ${CORPUS:?set CORPUS, the parts to pretrain on} \
        --total-steps "${STEPS:?set STEPS, the step to pretrain to}" --rewarm-steps 300 --max-minutes "${MIN_PRETRAIN:-3.4}" \
        --save-minutes 3 --log-every 500 --device "$DEVICE" > "$OUT/pretrain.log" 2>&1
    echo "pretrain: exit $?"; grep -E "saved|step [0-9]+ " "$OUT/pretrain.log" | tail -2
    rm -rf "$W/mlm" && $PY -m pretraining.portable pack "$W/pretrain/checkpoint.pt" "$W/mlm" | tail -1 &&
        cp "$W/pretrain/checkpoint.pt" "$W/base.pt" && bring_back mlm
fi
if runs span; then
    $PY -m pretraining.finetune_span --encoder "$W/base.pt" --train "$DATA/mrc/cmrc2018/train.json" \
        --select "$DATA/mrc/cmrc2018/trial.json" --report "$DATA/mrc/cmrc2018/dev.json" --out "$W/mrc_span" \
        --max-seq-len 256 --doc-stride 128 --epochs "${EPOCHS_SPAN:-8}" --lr "${LR_SPAN:-1.5e-4}" \
        --max-minutes "${MIN_SPAN:-4}" --float16 --device "$DEVICE" > "$OUT/span.log" 2>&1
    echo "span: exit $?"; grep -E "select at|report" "$OUT/span.log" | tail -3; bring_back mrc_span
fi
if runs sentiment; then
    $PY -m pretraining.finetune_classifier sentiment --encoder "$W/base.pt" --data-dir "$DATA/sentiment" \
        --out "$W/encoder_sentiment" --augment --max-chars 254 --epochs "${EPOCHS_SENT:-4}" --batch-size 64 \
        --lr "${LR_SENT:-1.5e-4}" --max-minutes "${MIN_SENT:-2.5}" --float16 --device "$DEVICE" ${SENT_ARGS:-} \
        > "$OUT/sentiment.log" 2>&1
    echo "sentiment: exit $?"; grep -vE "step [0-9]+/" "$OUT/sentiment.log" | tail -10; bring_back encoder_sentiment
fi
if runs similarity; then
    $PY -m pretraining.finetune_classifier similarity --encoder "$W/base.pt" --data-dir "$DATA/matching" \
        --out "$W/encoder_similarity" --hard-negatives 8000 --epochs "${EPOCHS_SIM:-3}" --batch-size 64 \
        --lr "${LR_SIM:-1e-4}" --max-minutes "${MIN_SIM:-2.2}" --float16 --device "$DEVICE" > "$OUT/similarity.log" 2>&1
    echo "similarity: exit $?"; grep -vE "step [0-9]+/" "$OUT/similarity.log" | tail -7; bring_back encoder_similarity
fi
