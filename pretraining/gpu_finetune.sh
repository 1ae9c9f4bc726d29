#!/usr/bin/env bash
# One GPU call: optionally pretrain further from CHECKPOINT, then fine-tune the span head (CMRC 2018),
# the sentiment head and the pair cross-encoder side by side (a 6 x 384 run leaves most of a GPU idle),
# and pack what was written into 15 MiB pieces under $OUT, in the order of BRING, while they fit in
# what a call brings back (8 files, 64 MiB; 60 kept for the logs' tarball).  What does not fit waits in
# $W, named in $W/rest, for `rest` on the still-warm machine.  Runs from the repository root with
# PyTorch and numpy alone: no install (a taskflow/tasks -> ../tasks link stands in for the package
# mapping), no Paddle, no jieba.
#
#   DATA=.gpu/call/data.tar.xz WHEELS=".gpu/call/*.whl" CHECKPOINT=.gpu/call/ckpt \
#       CORPUS=".gpu/call/shards/*.u16.xz" W=/tmp/g bash pretraining/gpu_finetune.sh run
#   W=/tmp/g bash pretraining/gpu_finetune.sh rest      # the next call: what did not fit
#
# DATA: a folder (or a .tar.xz / .tar.gz of a folder named data) holding mrc/cmrc2018/{train,trial,dev}.json,
# sentiment/<set>/..., matching/<set>/*.tsv, as ../shared/data does.
# WHEELS: wheels to install first (OpenCC: the encoder's normalisation starts with t2s).
# CHECKPOINT: a packed checkpoint (portable.py pack).
# CORPUS: corpus parts or shards (shards.py); when set, `pretrain --init-encoder` runs first: a new
# schedule (warm-up WARMUP, linear decay to 0.1 over STEPS, peak LR_PRETRAIN) at SEQ_LEN x BATCH_PRETRAIN,
# stopped by MIN_PRETRAIN minutes; it keeps the checkpoint's MLM head, and the fine-tunings start from it.
# ONLY: the fine-tunings to run, of "span sentiment similarity".  Their epochs, learning rates and
# time guards: EPOCHS_*, LR_*, MIN_FT; the span windows: SPAN_SEQ / SPAN_STRIDE.
# Dry run on a CPU at toy scale: DEVICE=cpu STEPS=4 BATCH_PRETRAIN=4 SEQ_LEN=64 MIN_PRETRAIN=0.3 MIN_FT=0.2
# with a DATA of a few lines a file.
set -u
PY=${PY:-python3}; W=${W:-/tmp/g}; DEVICE=${DEVICE:-auto}; OUT=${OUT:?set OUT, the folder that comes back}
ONLY=${ONLY:-span sentiment similarity}; BRING=${BRING:-span sentiment pretrain similarity}
MIN_FT=${MIN_FT:-4}
mkdir -p "$W/logs" "$OUT"
started=$(date +%s)
stamp() { echo "[$(( $(date +%s) - started ))s] $*"; }

bring_back() {   # a folder in $W as 15 MiB pieces in $OUT, while they fit; else named in $W/rest
    local name=$1 size files
    [ -d "$W/$name" ] || { stamp "nothing to bring back: $name"; return 0; }
    (cd "$W" && rm -f "$name.tar"* && tar cf "$name.tar" "$name" && split -b 15M "$name.tar" "$name.tar.")
    size=$(du -cm "$OUT" "$W/$name".tar.?? | tail -1 | cut -f1)
    files=$(( $(find "$OUT" -type f | wc -l) + $(ls "$W/$name".tar.?? | wc -l) ))
    if [ "$size" -le 60 ] && [ "$files" -le 7 ]; then   # the 8th file: the logs' tarball
        cp "$W/$name".tar.?? "$OUT/" && stamp "brought back: $name"
    else
        echo "$name" >> "$W/rest" && stamp "left in $W for the next call: $name"
    fi
}
pack_logs() { (cd "$W" && tar czf "$OUT/logs.tar.gz" logs); }

case "${1:?say run or rest}" in
rest)
    names=$(cat "$W/rest" 2>/dev/null); rm -f "$W/rest"
    for name in $names; do bring_back "$name"; done
    exit ;;
run) ;;
*) echo "unknown step: $1" >&2; exit 2 ;;
esac

if [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $WHEELS || exit
    export PYTHONPATH=/tmp/site
fi
# Only where taskflow is not installed (the bare GPU machine): a link stands in for the package mapping.
$PY -c "import taskflow.tasks" 2>/dev/null || [ -e taskflow/tasks ] || ln -s ../tasks taskflow/tasks
DATA=${DATA:?set DATA}
case "$DATA" in
*.tar.xz) tar xJf "$DATA" -C "$W" && DATA=$W/data ;;
*.tar.gz) tar xzf "$DATA" -C "$W" && DATA=$W/data ;;
esac
$PY -m pretraining.portable unpack "${CHECKPOINT:?set CHECKPOINT}" "$W/base.pt" || exit
stamp "unpacked $CHECKPOINT; data in $DATA"

if [ -n "${CORPUS:-}" ]; then
    $PY -m pretraining.pretrain --init-encoder "$W/base.pt" --objective mlm --out "$W/pretrain" \
        --corpus $CORPUS --seq-len "${SEQ_LEN:-512}" --batch-size "${BATCH_PRETRAIN:-128}" \
        --lr "${LR_PRETRAIN:-2e-4}" --warmup-steps "${WARMUP:-200}" --min-lr-ratio 0.1 \
        --total-steps "${STEPS:?set STEPS, the length of the new schedule}" --max-minutes "${MIN_PRETRAIN:-2.5}" \
        --save-minutes 30 --log-every 250 --no-compile --device "$DEVICE" > "$W/logs/pretrain.log" 2>&1
    stamp "pretrain: exit $?; $(grep -E 'saved' "$W/logs/pretrain.log" | tail -1)"
    cp "$W/pretrain/loss.jsonl" "$W/logs/loss_pretrain.jsonl" 2>/dev/null
    if [ -f "$W/pretrain/checkpoint.pt" ]; then
        cp "$W/pretrain/checkpoint.pt" "$W/base.pt"
        ($PY -m pretraining.portable pack "$W/pretrain/checkpoint.pt" "$W/ckpt" > "$W/logs/pack.log" 2>&1 &&
            rm -rf "$W/pretrain_ckpt" && mv "$W/ckpt" "$W/pretrain_ckpt") &
    fi
fi

runs() { case " $ONLY " in *" $1 "*) return 0;; *) return 1;; esac; }
if runs span; then
    $PY -m pretraining.finetune_span --encoder "$W/base.pt" --train "$DATA/mrc/cmrc2018/train.json" \
        --select "$DATA/mrc/cmrc2018/trial.json" --report "$DATA/mrc/cmrc2018/dev.json" --out "$W/span" \
        --max-seq-len "${SPAN_SEQ:-512}" --doc-stride "${SPAN_STRIDE:-128}" --epochs "${EPOCHS_SPAN:-8}" \
        --lr "${LR_SPAN:-1.5e-4}" --max-minutes "$MIN_FT" --float16 --device "$DEVICE" ${SPAN_ARGS:-} > "$W/logs/span.log" 2>&1 &
fi
if runs sentiment; then
    $PY -m pretraining.finetune_classifier sentiment --encoder "$W/base.pt" --data-dir "$DATA/sentiment" \
        --out "$W/sentiment" --social --augment --augment-kinds invariance,negation,contrast,slang,no_opinion \
        --neutral-text "$DATA/matching/afqmc/train.tsv" "$DATA/matching/bq_corpus/train.tsv" \
        --max-chars 254 --epochs "${EPOCHS_SENT:-4}" --batch-size "${BATCH_SENT:-96}" --lr "${LR_SENT:-2e-4}" \
        --max-minutes "$MIN_FT" --float16 --device "$DEVICE" > "$W/logs/sentiment.log" 2>&1 &
fi
if runs similarity; then
    $PY -m pretraining.finetune_classifier similarity --encoder "$W/base.pt" --data-dir "$DATA/matching" \
        --out "$W/similarity" --hard-negatives "${HARD_NEG:-8000}" --epochs "${EPOCHS_SIM:-3}" --batch-size 64 \
        --lr "${LR_SIM:-1e-4}" --max-minutes "$MIN_FT" --float16 --device "$DEVICE" ${SIM_ARGS:-} > "$W/logs/similarity.log" 2>&1 &
fi
wait
for run in $ONLY; do
    stamp "$run: $(grep -E 'select at|report:|/dev:|/test:|swap|contrast_dev:|suite|wrote|Error|error' "$W/logs/$run.log" | tail -14 | tr '\n' ';')"
    [ -f "$W/$run/manifest.json" ] && cp "$W/$run/manifest.json" "$W/logs/manifest_$run.json"
done
rm -f "$W/rest"
for name in $BRING; do
    case "$name" in pretrain) [ -n "${CORPUS:-}" ] && bring_back pretrain_ckpt ;; *) runs "$name" && bring_back "$name" ;; esac
done
stamp "done"
pack_logs
