#!/bin/sh
# Train a SentencePiece tokenizer with txlgen's settings (byte fallback,
# identity normalization, spaces kept, no dummy prefix: see README.md).
# train.py does the same when it is given no --tokenizer.
#   models/tokenizer.sh TRAIN.txt OUT_PREFIX [VOCAB=8000] [TYPE=unigram]
# writes OUT_PREFIX.model and OUT_PREFIX.vocab.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from txlgen.train import train_tokenizer
print(train_tokenizer(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                            sys.argv[5]))
' "$here" "$1" "$2" "${3:-8000}" "${4:-unigram}"
