#!/bin/sh
# Retrain the default model (models/sotu.bin) from scratch: fetch the corpus,
# train the tokenizer and the model, export.  Run from anywhere:
#   models/retrain.sh [RUN_DIR]          (default: models/runs/default)
# Four epochs (4032 steps) take about 90 minutes on 2 CPU cores (bfloat16
# on AMX), plus a few minutes of evaluation and export.  Extra train.py
# options are appended from TRAIN_ARGS, e.g. TRAIN_ARGS="--steps 20".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
run=${1:-$here/runs/default}
"$here/corpus.sh" "$here/data"
mkdir -p "$run"
unset OPENBLAS_CORETYPE           # set to Haswell here, and much slower
export OMP_WAIT_POLICY=PASSIVE    # busy-waiting OpenMP threads cost speed
# shellcheck disable=SC2086
exec /usr/bin/python3 "$here/train.py" \
    --train "$here/data/train.txt" --valid "$here/data/valid.txt" \
    --vocab-size 8000 --spm-type unigram \
    --layers 6 --d-model 256 --heads 4 --d-head 64 --d-inner 1024 \
    --seg-len 128 --mem-len 128 --batch 16 \
    --dropout 0.1 --dropatt 0.0 \
    --lr 1e-3 --warmup 150 --weight-decay 0.01 --clip 0.25 --seed 1 \
    --epochs 4 --eval-every 250 --eval-tokens 20000 --save-every 250 \
    --out "$run" --export "$run/sotu.bin" --dtype F32 \
    --description "Transformer-XL trained on State of the Union addresses 1790-2005" \
    ${TRAIN_ARGS:-}
