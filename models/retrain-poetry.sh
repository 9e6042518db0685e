#!/bin/sh
# Retrain the poetry model (models/poetry.bin) from scratch: the corpus
# (poetry-corpus.sh: the Song ci, one a line), the tokenizer, one training
# run, the export.  Run from anywhere:
#   models/retrain-poetry.sh [RUN_DIR]   (default: models/runs/poetry)
# Interrupted, the same command resumes from the run's last checkpoint
# (train.py --resume); the schedule follows training time, so a resumed
# run ends where one run would.
# Environment:
#   DEVICE       cpu (default) or cuda
#   MINUTES      training time (default 85: what the shipped model had)
#   TRAIN_ARGS   appended to train.py's options (e.g. "--steps 20")
#   DTYPE        storage type of the exported model (default BF16)
#   PYTHON       the Python with torch (default /usr/bin/python3)
#   DATA         the corpus folder (default models/data-poetry, made by
#                poetry-corpus.sh when missing)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
run=${1:-$here/runs/poetry}
data=${DATA:-$here/data-poetry}
py=${PYTHON:-/usr/bin/python3}
[ -f "$data/train.txt" ] && [ -f "$data/valid.txt" ] || "$here/poetry-corpus.sh" "$data"
mkdir -p "$run"
unset OPENBLAS_CORETYPE           # set to Haswell here, and much slower
export OMP_WAIT_POLICY=PASSIVE    # busy-waiting OpenMP threads cost speed

# SentencePiece unigram over the ci's characters and their most frequent
# pairs (8,000 pieces: 0.87 a character); models/README.md has the
# character-level tokenizer's figures beside it
tok=$run/spm.model
[ -f "$tok" ] || "$here/tokenizer.sh" "$data/train.txt" "$run/spm" 8000 unigram

resume=
[ -f "$run/last.pt" ] && resume=--resume
# shellcheck disable=SC2086
"$py" "$here/train.py" --device "${DEVICE:-cpu}" \
    --train "$data/train.txt" --valid "$data/valid.txt" --tokenizer "$tok" \
    --layers 6 --d-model 256 --heads 4 --d-inner 1024 \
    --dropout 0.1 --dropatt 0.0 --weight-decay 0.01 --clip 0.25 \
    --seg-len 128 --mem-len 128 --batch 32 \
    --lr 1e-3 --warmup 100 --seed 1 --time-budget "${MINUTES:-85}" \
    --eval-every 300 --eval-tokens 5000 --save-every 50 \
    --out "$run" $resume ${TRAIN_ARGS:-} \
    --export "$run/poetry.bin" --dtype "${DTYPE:-BF16}" \
    --description "Transformer-XL trained on the Song ci (chinese-poetry 2.0.1)"

# the recommended settings: one ci a line, so generation stops at the
# line break that ends one (models/README.md: how they were chosen)
"$py" "$here/txlfile.py" --dtype "${DTYPE:-BF16}" \
    --set 'recommended={"temp": 0.8, "top_k": 40, "top_p": 0.95, "repeat_penalty": 1.1, "repeat_last_n": 32, "stop": ["\n"]}' \
    "$run/poetry.bin" "$run/poetry.bin.tmp"
mv "$run/poetry.bin.tmp" "$run/poetry.bin"
echo "retrain-poetry.sh: $run/poetry.bin (copy it to models/poetry.bin)" >&2
