#!/usr/bin/python3
"""Write the SentencePiece model of an original Transformer-XL
vocabulary: see `vocab.py --help` and txlgen/vocab.py."""

import sys

from txlgen.needs import require

require("vocab.py", "sentencepiece")
from txlgen.vocab import main  # noqa: E402 (after the check)

if __name__ == "__main__":
    sys.exit(main())
