#!/usr/bin/env bash
# The objective pilot in one GPU call: from CHECKPOINT, equal minutes of masked-LM and of ELECTRA's
# replaced-token detection, side by side on one GPU (a 6 x 384 run leaves most of it idle), on the
# corpus shards gathered in $W/shards; then each arm fine-tuned the same way, all four side by side:
# the span head on CMRC 2018 (selected on trial, reported on dev) and the sentiment head (reviews +
# SMP2020 Weibo posts).  The arm with the higher trial F1 / 100 + mean review-dev accuracy wins; its
# checkpoint (packed) and span package come back in this call, its sentiment package and every
# manifest in the next (BRING=rest), within the 8 files and 64 MiB a call brings back.
#
#   # call 1..n-1: gather corpus shards (each call carries other pieces, with shards.json)
#   SHARDS=.gpu/shardsA W=/tmp/g bash pretraining/gpu_pilot.sh gather
#   # call n: the pilot
#   SHARDS=.gpu/shardsB DATA=.gpu/data.tar.xz WHEELS=".gpu/whl/*.whl" CHECKPOINT=.gpu/mlm_6x384_34k \
#       W=/tmp/g bash pretraining/gpu_pilot.sh pilot
#   # call n+1, on the still-warm machine: what did not fit
#   W=/tmp/g bash pretraining/gpu_pilot.sh rest
#
# Dry run on a CPU at toy scale: DEVICE=cpu MIN_PILOT=0.5 MIN_FT=0.3 STEPS=4 BATCH=16 with a small DATA.
set -u
PY=${PY:-python3}; W=${W:-/tmp/g}; DEVICE=${DEVICE:-auto}; OUT=${OUT:?set OUT, the folder that comes back}
MIN_PILOT=${MIN_PILOT:-3.8}; MIN_FT=${MIN_FT:-3.0}; STEPS=${STEPS:-4000}; LR=${LR:-2e-4}; BATCH=${BATCH:-256}
EPOCHS_SPAN=${EPOCHS_SPAN:-3}; EPOCHS_SENT=${EPOCHS_SENT:-2}
ARMS="mlm electra"
mkdir -p "$W/shards" "$OUT"
started=$(date +%s)
stamp() { echo "[$(( $(date +%s) - started ))s] $*"; }

gather() { [ -n "${SHARDS:-}" ] && cp "$SHARDS"/*.u16.xz "$SHARDS"/shards.json "$W/shards/" && \
    stamp "shards in $W: $(ls "$W/shards"/*.u16.xz | wc -l) pieces, $(du -sm "$W/shards" | cut -f1) MiB"; }

bring_back() {   # a folder in $W as 15 MiB pieces in $OUT, while they fit (8 files, 60 MiB kept)
    local name=$1 size files
    [ -d "$W/$name" ] || { stamp "nothing to bring back: $name"; return 0; }
    (cd "$W" && rm -f "$name.tar"* && tar cf "$name.tar" "$name" && split -b 15M "$name.tar" "$name.tar.")
    size=$(( $(du -cm "$OUT" "$W/$name".tar.?? | tail -1 | cut -f1) ))
    files=$(( $(find "$OUT" -type f | wc -l) + $(ls "$W/$name".tar.?? | wc -l) ))
    if [ "$size" -le 60 ] && [ "$files" -le 7 ]; then   # the 8th file: the logs' tarball
        cp "$W/$name".tar.?? "$OUT/" && stamp "brought back: $name"
    else
        stamp "left in $W for the next call: $name"
    fi
}

pack_logs() { (cd "$W" && tar czf "$OUT/logs.tar.gz" logs); }

case "${1:?say gather, pilot or rest}" in
gather)
    gather; exit ;;
rest)
    mkdir -p "$W/logs"; for name in $(cat "$W/rest" 2>/dev/null); do bring_back "$name"; done
    pack_logs; exit ;;
pilot) ;;
*) echo "unknown step: $1" >&2; exit 2 ;;
esac

gather
if [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $WHEELS || exit
    export PYTHONPATH=/tmp/site
fi
$PY -c "import taskflow.tasks" 2>/dev/null || [ -e taskflow/tasks ] || ln -s ../tasks taskflow/tasks
if [ -f "${DATA:?set DATA}" ]; then mkdir -p "$W/data" && tar xJf "$DATA" -C "$W" && DATA=$W/data; fi
mkdir -p "$W/logs"
$PY -m pretraining.portable unpack "${CHECKPOINT:?set CHECKPOINT}" "$W/base.pt" || exit
stamp "unpacked $CHECKPOINT"

# 1. The pilot: both arms start from the checkpoint's encoder (the MLM arm keeps its MLM head too) with
# the same schedule, data, seed and minutes; neither is compiled (the compile would eat a minute of four).
for arm in $ARMS; do
    $PY -m pretraining.pretrain --init-encoder "$W/base.pt" --objective "$arm" --out "$W/$arm" \
        --corpus "$W"/shards/*.u16.xz --seq-len 256 --batch-size "$BATCH" --lr "$LR" --warmup-steps 300 \
        --min-lr-ratio 0.3 --total-steps "$STEPS" --max-minutes "$MIN_PILOT" --save-minutes 30 --log-every 250 \
        --no-compile --device "$DEVICE" > "$W/logs/pretrain_$arm.log" 2>&1 &
done
wait
for arm in $ARMS; do
    stamp "$arm: $(grep -E 'saved' "$W/logs/pretrain_$arm.log" | tail -1)"
    cp "$W/$arm/loss.jsonl" "$W/logs/loss_$arm.jsonl" 2>/dev/null
done

# 2. Each arm fine-tuned the same way, the four runs side by side.
for arm in $ARMS; do
    [ -f "$W/$arm/checkpoint.pt" ] || { stamp "$arm: no checkpoint"; continue; }
    $PY -m pretraining.finetune_span --encoder "$W/$arm/checkpoint.pt" --train "$DATA/mrc/cmrc2018/train.json" \
        --select "$DATA/mrc/cmrc2018/trial.json" --report "$DATA/mrc/cmrc2018/dev.json" --out "$W/span_$arm" \
        --max-seq-len 256 --doc-stride 128 --epochs "$EPOCHS_SPAN" --lr 1.5e-4 --max-minutes "$MIN_FT" --float16 \
        --device "$DEVICE" > "$W/logs/span_$arm.log" 2>&1 &
    $PY -m pretraining.finetune_classifier sentiment --encoder "$W/$arm/checkpoint.pt" --data-dir "$DATA/sentiment" \
        --out "$W/sentiment_$arm" --social --augment --augment-kinds invariance,negation,contrast,slang,no_opinion \
        --neutral-text "$DATA/matching/afqmc/train.tsv" "$DATA/matching/bq_corpus/train.tsv" \
        --max-chars 254 --epochs "$EPOCHS_SENT" --batch-size 64 --lr 1.5e-4 --max-minutes "$MIN_FT" --float16 \
        --device "$DEVICE" > "$W/logs/sentiment_$arm.log" 2>&1 &
done
wait
for arm in $ARMS; do
    for run in span sentiment; do
        [ -f "$W/${run}_$arm/manifest.json" ] && cp "$W/${run}_$arm/manifest.json" "$W/logs/manifest_${run}_$arm.json"
    done
done

# 3. The winner: trial F1 / 100 + the mean of the review dev splits.
winner=$($PY - "$W" $ARMS <<'EOF'
import json, sys
from pathlib import Path
w, arms = Path(sys.argv[1]), sys.argv[2:]
scores = {}
for arm in arms:
    try:
        span = json.loads((w / f"span_{arm}/manifest.json").read_text())["metrics"]["selection"]["f1"]
        sent = json.loads((w / f"sentiment_{arm}/manifest.json").read_text())["metrics"]
    except (OSError, KeyError):
        continue
    dev = [v for k, v in sent.items() if k.endswith("/dev") and not k.startswith("smp2020")]
    scores[arm] = span / 100 + sum(dev) / len(dev)
    print(f"{arm}: trial F1 {span:.2f}, review dev mean {sum(dev) / len(dev):.4f}, score {scores[arm]:.4f}",
          file=sys.stderr)
print(max(scores, key=scores.get) if scores else "")
EOF
)
stamp "winner: ${winner:-none}"
[ -n "$winner" ] || { pack_logs; exit 1; }
$PY -m pretraining.portable pack "$W/$winner/checkpoint.pt" "$W/ckpt_$winner" | tail -1
bring_back "ckpt_$winner"
bring_back "span_$winner"
echo "sentiment_$winner" > "$W/rest"
stamp "done"
pack_logs
