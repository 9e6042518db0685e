#!/usr/bin/python3
"""Build a random-weight Transformer-XL model file for the tests: see
`make_random_model.py --help` and txlgen/random_model.py."""

import sys

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen.random_model import main

if __name__ == "__main__":
    sys.exit(main())
