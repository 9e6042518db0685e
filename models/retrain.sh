#!/bin/sh
# Retrain the default model (models/sotu.bin) from scratch: fetch the corpus,
# train the tokenizer and the model, export.  Run from anywhere:
#   models/retrain.sh [RUN_DIR]          (default: models/runs/default)
# Three stages on the train split only, each starting from the best
# checkpoint of the one before (models/README.md says why):
#   1-base         4 epochs from scratch                       ~80 minutes
#   2-typographic  5 epochs, half the addresses rewritten       ~85 minutes
#                  with typographic quotes and dashes
#   3-recent       4 epochs on the most recent 20% (1947-2005)  ~15 minutes
# on 2 CPU cores (bfloat16 on AMX), plus a few minutes of evaluation and
# export.  Extra train.py options are appended to every stage from
# TRAIN_ARGS, e.g. TRAIN_ARGS="--steps 20" for a trial run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
run=${1:-$here/runs/default}
"$here/corpus.sh" "$here/data"
mkdir -p "$run"
unset OPENBLAS_CORETYPE           # set to Haswell here, and much slower
export OMP_WAIT_POLICY=PASSIVE    # busy-waiting OpenMP threads cost speed

stage() {
    # shellcheck disable=SC2086
    /usr/bin/python3 "$here/train.py" \
        --train "$here/data/train.txt" --valid "$here/data/valid.txt" \
        --layers 6 --d-model 256 --heads 4 --d-head 64 --d-inner 1024 \
        --seg-len 128 --mem-len 128 --batch 16 \
        --dropout 0.1 --dropatt 0.0 --weight-decay 0.01 --clip 0.25 \
        --eval-every 250 --eval-tokens 20000 --save-every 250 \
        "$@" ${TRAIN_ARGS:-}
}

stage --out "$run/1-base" --vocab-size 8000 --spm-type unigram \
    --lr 1e-3 --warmup 150 --seed 1 --epochs 4
stage --out "$run/2-typographic" --tokenizer "$run/1-base/spm.model" \
    --init "$run/1-base/best.pt" --typographic 0.5 \
    --lr 6e-4 --warmup 100 --seed 2 --epochs 5
stage --out "$run/3-recent" --tokenizer "$run/1-base/spm.model" \
    --init "$run/2-typographic/best.pt" --typographic 0.5 --train-tail 0.2 \
    --lr 3e-4 --warmup 50 --seed 3 --epochs 4 \
    --export "$run/sotu.bin" --dtype F32 \
    --description "Transformer-XL trained on State of the Union addresses 1790-2005"
