#!/bin/sh
# Train the small adaptive-span model (attn_type 4) of bench/kl_table.py's
# table on the State of the Union train split, with the default model's
# tokenizer (models/sotu.bin's: the same 8,000 pieces, so bits per byte
# compare), and export it in F32.  Fixed seed and settings; the file's
# sha256 (bench/kl_table-span.json) says whether a rerun (another CPU or
# thread count may round differently) gave the table's model.
# Run from anywhere:
#   models/retrain-span.sh [RUN_DIR]
#       (default: ${XDG_CACHE_HOME:-~/.cache}/txlgen/span-sotu, outside
#       the tree: the model, 11 MB, is not committed)
# Writes RUN_DIR/span-sotu.bin and prints its sha256.  Skips the training
# when RUN_DIR/best.pt exists (delete it to train again).
# Environment:
#   PYTHON  the Python with torch (default /usr/bin/python3)
#   DATA    the corpus folder (train.txt, valid.txt; default models/data,
#           made by corpus.sh when missing)
#   TRAIN_ARGS  appended to train.py's options (e.g. "--steps 2" for a
#           trial run: then not the table's model)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
run=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/txlgen/span-sotu}
data=${DATA:-$here/data}
py=${PYTHON:-/usr/bin/python3}
[ -f "$data/train.txt" ] && [ -f "$data/valid.txt" ] || "$here/corpus.sh" "$data"
mkdir -p "$run"
unset OPENBLAS_CORETYPE
export OMP_WAIT_POLICY=PASSIVE

"$py" -c 'import sys; sys.path.insert(0, sys.argv[1])
from txlgen import txlfile
open(sys.argv[3], "wb").write(txlfile.read(sys.argv[2])[1]["tokenizer.model"])' \
    "$here" "$here/sotu.bin" "$run/spm.model"

# 3 layers, d_model 128, 2 heads of 64, d_inner 512: 2.6M parameters (most
# of them the 8,000-token embedding and output); spans up to 256 tokens,
# learned from 0 (ramp 32, span loss 2e-6 as the paper's enwik8 runs);
# 240 steps of 16 x 128 tokens (0.5M tokens, a quarter of an epoch).
if [ ! -f "$run/best.pt" ]; then
    "$py" "$here/train.py" --train "$data/train.txt" --valid "$data/valid.txt" \
        --tokenizer "$run/spm.model" --out "$run" \
        --attn-type 4 --layers 3 --d-model 128 --heads 2 --d-inner 512 \
        --attn-span 256 --span-ramp 32 --span-init 0 --span-loss 2e-6 \
        --seg-len 128 --batch 16 --dropout 0.1 --dropatt 0 \
        --lr 2e-3 --warmup 30 --steps 240 --weight-decay 0.01 --clip 0.25 \
        --seed 1 --threads 2 --dtype-train f32 \
        --eval-every 120 --eval-tokens 20000 --save-every 120 --log-every 20 \
        ${TRAIN_ARGS:-}
fi
"$py" "$here/train.py" --out "$run" --export-only --export "$run/span-sotu.bin" \
    --dtype F32 --description "adaptive-span model (attn_type 4) trained on State of the Union addresses 1790-2005 (models/retrain-span.sh)"
sha256sum "$run/span-sotu.bin"
