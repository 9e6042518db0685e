#!/usr/bin/python3
"""Train a Transformer-XL language model and export it as a txlgen model
file: see `train.py --help` and txlgen/train.py."""

import sys

from txlgen.needs import require

require("train.py", "torch", "numpy", "sentencepiece")
from txlgen.train import main  # noqa: E402 (after the check)

if __name__ == "__main__":
    sys.exit(main())
