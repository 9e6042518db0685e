"""The Python side of txlgen, one package:

  conventions   the attention kinds, each origin's LayerNorm epsilon,
                the same_length masks, the memory starts, and the
                storage types (read from lib/'s list)
  errors        InputError, the one error class of bad input
  needs         the modules a program needs, checked first (one line)
  progress      the programs' progress line (a terminal's) and sizes
  hparams       a model's hyperparameters (TxlConfig, HPARAM_NAMES)
  loadable      what txlgen's loader accepts (limits: lib/base/txl-limits.h)
  txlfile       the model file: reader, writer, quantizers (GPTQ too)
  calibrate     activation statistics of a text for Q4_K (torch)
  checkpoint    Transformer-XL checkpoints, read without running them;
                corpus caches (cache.pkl) with their arrays skipped
  proto         the protobuf wire format (SentencePiece, TensorFlow)
  tfckpt        TensorFlow checkpoints (tensor bundles), without TensorFlow
  tfwrite       TensorFlow checkpoints written, for the tests
  vocab         the original code's vocabularies as SentencePiece models
  span_convert  adaptive-span checkpoints as model files of attn_type 4
  convert       checkpoint + tokenizer -> model file
  txl_ref       the PyTorch reference model (the oracle of the tests)
  span_ref      the PyTorch reference of the adaptive span (attn_type 4)
  hf_ref        Hugging Face's TransfoXL forward, transcribed (an oracle)
  span_model    random-weight adaptive-span checkpoints for the tests
  train         training and export
  sampling      measuring recommended sampling settings
  random_model  random-weight models for the tests
  original      the original code, run beside ours as an oracle
  api           libtxl from Python through ctypes: Model, Session (the
                standard library only; `from txlgen import Model`)

conventions, errors, hparams, proto, loadable, txlfile, checkpoint, vocab,
span_convert and convert need only the standard library, numpy and SentencePiece's Python
module:
models/convert.py and models/txlfile.py run without PyTorch.  The rest
import torch.  loadable reads lib/'s headers, so the package runs from
txlgen's source tree.

Where it is found: the programs in models/ (convert.py, txlfile.py,
vocab.py, train.py, sampling.py) are thin entry points beside this
folder, and Python puts a script's own folder on its path, so they run
as they are.  The scripts of tests/, tools/ and bench/ find it from
their own file too (srctree.py beside them puts models/ on sys.path),
from any folder, without PYTHONPATH.  Installed: pip install ./models
(models/pyproject.toml; setup.py copies lib/'s headers into the
package), with the commands txlgen-convert, txlgen-txlfile,
txlgen-vocab, txlgen-train and txlgen-sampling.
"""

# `from txlgen import Model`: the binding is imported at first use, and
# alone (no NumPy, no torch), as importing the package imports nothing.
_API = ("Model", "Session", "TxlError", "ModelNotFoundError")


def __getattr__(name):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API))
