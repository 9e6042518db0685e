#!/usr/bin/python3
"""Convert a Transformer-XL checkpoint to a txlgen model file: see
`convert.py --help` and txlgen/convert.py.  Needs only Python's standard
library, numpy and SentencePiece (python3-numpy, python3-sentencepiece),
not PyTorch."""

import sys

from txlgen.needs import require

require("convert.py", "numpy", "sentencepiece")
from txlgen.convert import main  # noqa: E402 (after the check)

if __name__ == "__main__":
    sys.exit(main())
