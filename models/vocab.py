#!/usr/bin/python3
"""Write the SentencePiece model of an original Transformer-XL
vocabulary: see `vocab.py --help` and txlgen/vocab.py."""

import sys

from txlgen.vocab import main

if __name__ == "__main__":
    sys.exit(main())
