#!/bin/sh
# Retrain the default model (models/sotu.bin) from scratch: the corpus, the
# tokenizer (or TOKENIZER=spm.model to reuse one), three training stages,
# export.  Run from anywhere:
#   models/retrain.sh [RUN_DIR]          (default: models/runs/default)
# Stages (models/README.md says why), each from the best checkpoint of the
# one before:
#   1-base    from scratch on the train split (1790-2005), half of the
#             addresses rewritten with typographic quotes and dashes
#   2-recent  the most recent 20% of the train split (1947-2005)
#   3-final   the most recent 5% of train + valid (valid whole and the
#             train split from 2000): the era nearest the test split; no
#             validation (valid is trained on), the reported validation
#             figure is stage 2's
# Environment:
#   DEVICE       cpu (default) or cuda: where train.py trains
#   SHAPE        train.py options of the model's shape (default below)
#   TOKENIZER    an existing SentencePiece model instead of training one,
#                or a txlgen model file whose tokenizer to use
#                (TOKENIZER=models/sotu.bin keeps the shipped model's ids)
#   TRAIN_ARGS   appended to every stage (e.g. "--steps 20" for a trial run)
#   STAGE1_ARGS  appended to stage 1 only (e.g. "--time-budget 3")
#   DTYPE        storage type of the exported model (default BF16)
#   PYTHON       the Python with torch (default /usr/bin/python3)
#   DATA         the corpus folder (train.txt, valid.txt; default models/data,
#                made by corpus.sh when missing)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
run=${1:-$here/runs/default}
data=${DATA:-$here/data}
[ -f "$data/train.txt" ] && [ -f "$data/valid.txt" ] || "$here/corpus.sh" "$data"
mkdir -p "$run"
unset OPENBLAS_CORETYPE           # set to Haswell here, and much slower
export OMP_WAIT_POLICY=PASSIVE    # busy-waiting OpenMP threads cost speed

DEVICE=${DEVICE:-cpu}
SHAPE=${SHAPE:-"--layers 8 --d-model 384 --heads 6 --d-inner 1536 --dropout 0.25 --mem-len 128"}

stage() {
    # shellcheck disable=SC2086
    "${PYTHON:-/usr/bin/python3}" "$here/train.py" --device "$DEVICE" \
        $SHAPE --seg-len 128 --batch 64 \
        --dropatt 0.0 --weight-decay 0.01 --clip 0.25 \
        --eval-every 250 --eval-tokens 0 --save-every 250 \
        "$@" ${TRAIN_ARGS:-}
}

if [ -n "${TOKENIZER:-}" ]; then
    tok=$TOKENIZER
    case $tok in
    *.bin)  # a txlgen model file: its tokenizer
        tok=$run/spm.model
        "${PYTHON:-/usr/bin/python3}" -c 'import sys; sys.path.insert(0, sys.argv[1])
from txlgen import txlfile
open(sys.argv[3], "wb").write(txlfile.read(sys.argv[2])[1]["tokenizer.model"])' \
            "$here" "$TOKENIZER" "$tok" ;;
    esac
else
    tok=$run/spm.model
    [ -f "$tok" ] || "$here/tokenizer.sh" "$data/train.txt" "$run/spm" 8000 unigram
fi

# shellcheck disable=SC2086
stage --out "$run/1-base" --train "$data/train.txt" --valid "$data/valid.txt" \
    --tokenizer "$tok" --typographic 0.5 \
    --lr 1e-3 --warmup 200 --seed 1 --epochs 16 ${STAGE1_ARGS:-}
stage --out "$run/2-recent" --train "$data/train.txt" --valid "$data/valid.txt" \
    --tokenizer "$tok" --init "$run/1-base/best.pt" --typographic 0.5 \
    --train-tail 0.2 --lr 3e-4 --warmup 50 --seed 3 --epochs 4
{ cat "$data/train.txt"; echo; cat "$data/valid.txt"; } > "$run/trainvalid.txt"
stage --out "$run/3-final" --train "$run/trainvalid.txt" \
    --tokenizer "$tok" --init "$run/2-recent/best.pt" --typographic 0.5 \
    --train-tail 0.05 --lr 2e-4 --warmup 20 --seed 4 --epochs 4 \
    --export "$run/sotu.bin" --dtype "${DTYPE:-BF16}" \
    --description "Transformer-XL trained on State of the Union addresses 1790-2013"
