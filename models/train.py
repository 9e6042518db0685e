#!/usr/bin/python3
"""Train a Transformer-XL language model and export it as a txlgen model
file: see `train.py --help` and txlgen/train.py."""

import sys

from txlgen.train import main

if __name__ == "__main__":
    sys.exit(main())
