"""The original Transformer-XL vocabularies as SentencePiece models.

The original code (utils/vocabulary.py, data_utils.py) tokenizes a line
of each dataset's text files as

    line.strip() [.lower()] .split()  [+ ['<eos>']]   (wt103 wt2 ptb)
    ['<S>'] + line.split() + ['<S>']                  (lm1b)
    line.split(), no end of line                      (enwik8, text8)

where enwik8's text files hold each byte as its decimal value and text8's
each character, '_' for a space (their prep scripts); ids are in the
order of Vocab.idx2sym (specials, then by frequency).  read_vocab() reads
that vocabulary from the corpus cache (cache.pt, a pickled Corpus; the TF
code's cache.pkl, a Python 2 pickle whose symbols are str, i.e. UTF-8
bytes, and whose corpus arrays are skipped unread), from
Hugging Face's vocab.pkl / vocab.bin, or from a file of one symbol per
line (Vocab._build_from_file); to_spm() writes a SentencePiece model with
one piece per symbol in the same order, so that txlgen's ids are the
original's:

  word level: model type WORD; piece '\u2581' + word (SentencePiece's
    space mark), the unknown word ('<unk>' or '<UNK>') as its UNKNOWN
    piece, the end-of-line symbol as a CONTROL piece; a normalisation
    table maps every character Python's str.split() splits on to a space,
    and upper to lower case where the vocabulary has lower_case;
  character level: model type CHAR; text8's letters as themselves and
    '_' as the space; enwik8's byte values as byte pieces <0xNN> (byte
    fallback), so that every byte of the text is its own symbol.

What the model file's tokenizer cannot do alone, txlgen does from the
metadata to_spm() returns (man/txlgen-model.5, "Vocabularies of the
original code"): vocab_newline says what a newline is (eos: the <eos>
symbol; double_eos: lm1b's <S> around each line; drop: nothing), and
vocab_unk 'none' says that the vocabulary has no unknown symbol (enwik8,
text8): the tokenizer then has more pieces than the model, an UNKNOWN
piece last, at an id >= n_token, and text that needs one of those pieces
is refused, as the original
refuses it (Vocab.get_idx asserts); enwik8's tokenizer also has the
byte pieces its vocabulary lacks there (SentencePiece's byte fallback
needs all 256).  Whatever SentencePiece cannot
express is refused here with VocabError.
"""

import collections
import io
import os
import sys

from . import loadable
from .loadable import sentencepiece
from .errors import (EXIT_BAD_INPUT, InputError, OneLineParser, describe,
                     open_input)
from .hparams import is_int
from .proto import field as proto_field, fields as proto_fields

SPACE = "\u2581"

# dataset -> (level, newline, lower_case) as data_utils.get_lm_corpus and
# Corpus set them up
DATASETS = {
    "wt103": ("word", "eos", False),
    "wt2": ("word", "eos", False),
    "ptb": ("word", "eos", True),
    "lm1b": ("word", "double_eos", False),
    "enwik8": ("bytes", "drop", True),
    "text8": ("chars", "drop", True),
}

# the characters str.split() splits on (str.isspace)
PY_SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]


class VocabError(InputError):
    pass


# newline: what a newline is, where it is not the dataset's convention
# (None: the dataset's, DATASETS)
Vocabulary = collections.namedtuple(
    "Vocabulary", "symbols lower_case delimiter dataset unk source newline",
    defaults=(None,))


def _from_attrs(d, dataset, source):
    syms = d.get("idx2sym")
    if not isinstance(syms, list) or not syms or \
            not all(isinstance(s, str) for s in syms):
        raise VocabError(f"{source}: no idx2sym list of symbols")
    if len(set(syms)) != len(syms):
        raise VocabError(f"{source}: idx2sym has duplicates")
    unk = d.get("unk_idx")
    if not (is_int(unk) and 0 <= unk < len(syms)):
        unk = None
    return Vocabulary(syms, bool(d.get("lower_case", False)),
                      d.get("delimiter"), dataset, unk, source)


def read_vocab(path, dataset=None):
    """A Vocabulary from cache.pt, vocab.pkl / vocab.bin or a text file
    of symbols.  dataset (wt103 ... text8) overrides or completes what the
    file says about the conventions."""
    from . import checkpoint
    if dataset is not None and dataset not in DATASETS:
        raise VocabError(f"unknown dataset {dataset!r} (one of "
                         f"{', '.join(DATASETS)})")
    try:
        with open_input(path) as f:
            head = f.read(4)
    except OSError as e:
        raise VocabError(f"{path}: {e.strerror}")
    if head[:2] == b"PK" or head == b"\x80\x02\x8a\x0a":
        # torch.save: a zip archive, or the legacy format's magic number
        return vocab_of(checkpoint.load_pickle_file(path), path, dataset)
    if head[:1] == b"\x80":
        # a plain pickle: the TF code's cache.pkl (Python 2), HF's
        # vocab.pkl; its arrays (a corpus) skipped, never read
        obj, py2 = checkpoint.load_corpus_cache(path)
        return vocab_of(obj, path, dataset, py2)
    # Vocab._build_from_file: the first field of each line
    try:
        with io.TextIOWrapper(open_input(path), encoding="utf-8") as f:
            syms, seen = [], set()
            for n, line in enumerate(f, 1):
                fields = line.strip().split()
                if not fields:
                    raise VocabError(f"{path}: line {n} is empty")
                if fields[0] not in seen:      # add_symbol: first kept
                    seen.add(fields[0])
                    syms.append(fields[0])
    except (OSError, UnicodeDecodeError) as e:
        raise VocabError(f"{path}: {e}")
    if not syms:
        raise VocabError(f"{path}: no symbols")
    lower = DATASETS[dataset][2] if dataset else False
    unk = syms.index("<UNK>") if "<UNK>" in syms else None
    return Vocabulary(syms, lower, None, dataset, unk, path)


def _py2_text(d, path):
    """A Vocab's attributes with its symbols as text: Python 2 pickles
    hold them as str, i.e. bytes (UTF-8 for the non-ASCII words), which
    the unpickler reads as latin-1; their bytes decoded as UTF-8."""
    syms = d.get("idx2sym")
    if not isinstance(syms, list):
        return d
    out = []
    for i, s in enumerate(syms):
        if isinstance(s, str):
            try:
                raw = s.encode("latin-1")
            except UnicodeEncodeError:      # a Python 2 unicode symbol
                raw = None
            if raw is not None:
                try:
                    s = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise VocabError(f"{path}: symbol {i} ({raw[:40]!r}) is "
                                     "not UTF-8 text")
        out.append(s)
    return dict(d, idx2sym=out)


def vocab_of(obj, path, dataset=None, py2=False):
    """The Vocabulary in what a pickle file (path) held: a Corpus, a
    Vocab or Hugging Face's dict; py2: the pickle's strings are Python 2
    str (bytes)."""
    from . import checkpoint

    def text(d):
        return _py2_text(d, path) if py2 else d
    if isinstance(obj, checkpoint.StandIn) and \
            obj._cls == "data_utils.Corpus":
        ds = obj.__dict__.get("dataset")
        v = obj.__dict__.get("vocab")
        if not isinstance(v, checkpoint.StandIn):
            raise VocabError(f"{path}: Corpus without a vocab")
        if dataset is None and not (isinstance(ds, str) and
                                    ds in DATASETS):
            raise VocabError(f"{path}: unknown dataset {describe(ds)}: "
                             "give --dataset")
        return _from_attrs(text(v.__dict__), dataset or ds, path)
    if isinstance(obj, checkpoint.StandIn) and obj._cls.endswith("Vocab"):
        return _from_attrs(text(obj.__dict__), dataset, path)
    if isinstance(obj, dict):        # HF: the tokenizer's __dict__
        return _from_attrs(text(obj), dataset, path)
    raise VocabError(f"{path}: neither a Corpus, a Vocab nor a "
                     "vocabulary dict")


def conventions(v):
    """(level, newline, lower_case) of a vocabulary: the dataset's, with
    the vocabulary's own lower_case (and newline, if it has one); without
    a dataset, word level with <eos> (wt103 conventions, as Hugging
    Face's port) if it has <eos>."""
    if v.newline == "strip_eos":             # dwdb/transformer-xl's
        return "symbols", "strip_eos", v.lower_case
    if v.dataset:
        level, newline, _ = DATASETS[v.dataset]
        return level, v.newline or newline, v.lower_case
    if "<eos>" in v.symbols:
        return "word", "eos", v.lower_case
    raise VocabError(f"{v.source}: cannot tell the dataset's conventions "
                     "(no <eos>): give --dataset (wt103 wt2 ptb lm1b "
                     "enwik8 text8)")


# ModelProto.SentencePiece.Type and TrainerSpec.ModelType
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
WORD_MODEL, CHAR_MODEL = 3, 4


def charsmap(rules):
    """SentencePiece's precompiled normalisation table for rules
    {source string: replacement}, compiled by SentencePiece's own trainer
    (normalization_rule_tsv) and taken from the model it writes."""
    import tempfile
    spm = sentencepiece()
    if not rules:
        return b""
    with tempfile.TemporaryDirectory(prefix="txl-vocab-") as d:
        tsv, corpus = os.path.join(d, "rules.tsv"), os.path.join(d, "c.txt")
        with open(tsv, "w", encoding="utf-8") as f:
            for src, dst in sorted(rules.items()):
                f.write(" ".join(f"{ord(c):X}" for c in src) + "\t" +
                        " ".join(f"{ord(c):X}" for c in dst) + "\n")
        with open(corpus, "w") as f:
            f.write("ab\n")
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            input=corpus, model_writer=out, model_type="char",
            vocab_size=8, hard_vocab_limit=False,
            normalization_rule_tsv=tsv, minloglevel=3)
    for num, wt, payload, _ in proto_fields(out.getvalue()):
        if num == 3 and wt == 2:
            for n2, w2, p2, _ in proto_fields(payload):
                if n2 == 2 and w2 == 2:
                    return p2
    raise VocabError("SentencePiece wrote no normalisation table")


def lower_rules():
    """str.lower() of every character it changes (without context: a
    final capital sigma lowers to sigma, not final sigma)."""
    out = {}
    for c in range(0x110000):
        ch = chr(c)
        if 0xD800 <= c < 0xE000:
            continue
        lo = ch.lower()
        if lo != ch:
            out[ch] = lo
    return out


def to_spm(v):
    """(serialized SentencePiece ModelProto, metadata dict) for a
    Vocabulary.  Raises VocabError for what SentencePiece cannot express."""
    level, newline, lower = conventions(v)
    if v.delimiter not in (None,):
        raise VocabError(f"{v.source}: delimiter {v.delimiter!r}: only "
                         "whitespace-separated symbols are supported")
    syms = v.symbols
    pieces, rules = [], {}
    unk = v.unk
    eos_sym = {"eos": "<eos>", "double_eos": "<S>",
               "strip_eos": "<eos>"}.get(newline)
    if level == "word":
        if unk is None:
            for s in ("<unk>", "<UNK>"):
                if s in syms:
                    unk = syms.index(s)
                    break
        cap = loadable.limits()["TXL_MAX_PIECE_BYTES"]
        for i, s in enumerate(syms):
            if SPACE in s or not s or any(c.isspace() for c in s):
                raise VocabError(f"{v.source}: symbol {i} {s[:40]!r} holds "
                                 "a space or U+2581, which SentencePiece "
                                 "uses for spaces")
            # in running text a word is its bytes after a space
            if 1 + len(s.encode()) > cap:
                raise VocabError(f"{v.source}: symbol {i} {s[:20]!r}... is "
                                 f"{len(s.encode())} bytes: txlgen takes "
                                 f"words of at most {cap - 1}")
            if i == unk:
                pieces.append((s, UNKNOWN))
            elif s == eos_sym:
                pieces.append((s, CONTROL))
            else:
                pieces.append((SPACE + s, NORMAL))
        if eos_sym and eos_sym not in syms:
            raise VocabError(f"{v.source}: no {eos_sym} symbol for the "
                             "ends of lines")
        for c in PY_SPACES:
            if c != " ":
                rules[c] = " "
        model_type = WORD_MODEL
    elif level == "chars":                 # text8: '_' is the space
        for i, s in enumerate(syms):
            if s == "_":
                pieces.append((SPACE, NORMAL))
            elif s == eos_sym:
                pieces.append((s, CONTROL))
            elif len(s) == 1 and not s.isspace() and s != SPACE:
                pieces.append((s, NORMAL))
            else:
                raise VocabError(f"{v.source}: symbol {i} {s!r} is not one "
                                 "character")
        # the prep script writes '_' for a space and each character
        # between spaces, which str.split() then drops with any other
        # whitespace
        rules["_"] = " "
        for c in PY_SPACES:
            if c != " ":
                rules[c] = ""
        model_type = CHAR_MODEL
    elif level == "symbols":               # dwdb: each character itself
        if SPACE in syms:
            raise VocabError(f"{v.source}: symbol {syms.index(SPACE)} is "
                             "U+2581, which SentencePiece uses for spaces")
        for i, s in enumerate(syms):
            if s == " ":
                pieces.append((SPACE, NORMAL))
            elif s == eos_sym or s == "<pad>":
                pieces.append((s, CONTROL))
            elif s == "<unk>":
                pieces.append((s, UNKNOWN))
                unk = i
            elif len(s) == 1 and s != "\n":
                pieces.append((s, NORMAL))
            else:
                # never a symbol of text: the newline (an end of line
                # there), a lowering of more than one character; a
                # control piece the text cannot reach (which prints as
                # the symbol)
                pieces.append((s, CONTROL))
        if unk is None:
            raise VocabError(f"{v.source}: no <unk> symbol")
        model_type = CHAR_MODEL
    else:                                  # enwik8: decimal byte values
        for i, s in enumerate(syms):
            if s == eos_sym:
                pieces.append((s, CONTROL))
                continue
            if not (s.isdigit() and s.isascii() and int(s) < 256 and
                    str(int(s)) == s):
                raise VocabError(f"{v.source}: symbol {i} {s!r} is not a "
                                 "byte value (0-255)")
            pieces.append((f"<0x{int(s):02X}>", BYTE))
        rules["\n"] = ""
        model_type = CHAR_MODEL
        lower = False                      # lowers digits: nothing
    if lower:
        for src, dst in lower_rules().items():
            # a symbol is one character of the text, lowered, where each
            # character is looked up alone (dwdb): one that lowers to more
            # is left as it is (unknown)
            if src not in rules and (level != "symbols" or len(dst) == 1):
                rules[src] = dst
    if eos_sym and level != "word" and eos_sym not in syms:
        raise VocabError(f"{v.source}: no {eos_sym} symbol for the ends "
                         "of lines")
    if level == "bytes":
        # byte fallback needs all 256 byte pieces: those the vocabulary
        # lacks come after its symbols, out of the model's range
        have = set(p for p, _ in pieces)
        pieces += [(f"<0x{b:02X}>", BYTE) for b in range(256)
                   if f"<0x{b:02X}>" not in have]
        if len(pieces) > len(syms):
            unk = None
    extra_unk = unk is None
    if extra_unk:
        name = "<unk>"
        while any(p == name for p, _ in pieces):
            name = "<" + name + ">"
        pieces.append((name, UNKNOWN))
        unk_piece = name
    else:
        unk_piece = pieces[unk][0]

    trainer = (proto_field(3, model_type) + proto_field(4, len(pieces)) +
               proto_field(35, level == "bytes") +
               proto_field(40, [i for i, (_, t) in enumerate(pieces)
                           if t == UNKNOWN][0]) +
               proto_field(41, syms.index("<S>") if newline == "double_eos"
                      else -1) +
               proto_field(42, syms.index(eos_sym) if eos_sym else -1) +
               proto_field(43, -1) + proto_field(45, unk_piece) +
               proto_field(46, "<S>" if newline == "double_eos" else
                      "<txl-no-bos>") +
               proto_field(47, eos_sym or "<txl-no-eos>") +
               proto_field(48, "<txl-no-pad>"))
    norm = (proto_field(1, "txl-" + (v.dataset or level)) +
            proto_field(2, charsmap(rules)) +
            proto_field(3, level == "word") +     # add_dummy_prefix
            proto_field(4, level == "word") +     # remove_extra_whitespaces
            proto_field(5, level != "bytes"))     # escape_whitespaces
    proto = b"".join(proto_field(1, proto_field(1, p) + proto_field(2, 0.0) +
                            proto_field(3, t)) for p, t in pieces)
    proto += proto_field(2, trainer) + proto_field(3, norm)
    meta = {"vocab_kind": "word" if level == "word" else "char",
            "vocab_newline": newline,
            "vocab_unk": "none" if extra_unk else "piece",
            "vocab_lower_case": "true" if lower else "false"}
    if v.dataset:
        meta["vocab_dataset"] = v.dataset
    check(proto, v.source)
    return proto, meta


# Reading a prepared corpus a chunk at a time: text8's train.txt is one
# line of 180 MB.
CHUNK = 1 << 20
# The longest symbol of a prepared corpus (enwik8's are byte values,
# text8's characters, a word corpus's words): a run of text without
# whitespace longer than this is no corpus of symbols, and is refused
# before it is held whole (it was joined chunk by chunk, in quadratic
# time: 200 MB took hours).
MAX_SYMBOL = 1 << 16


def corpus_symbols(path, max_symbols=None):
    """The symbols of a prepared corpus in first-occurrence order, as the
    adaptive-span code's data.Dictionary builds them: each line of the
    file (read as UTF-8 text, universal newlines) split on whitespace,
    then '<eos>' (a last line without a newline too).  More than
    max_symbols (the checkpoint's vocabulary) is refused as soon as it is
    seen, not after the whole corpus is counted."""
    seen, syms = set(), []

    def add(parts):
        if not seen.issuperset(parts):
            for p in parts:
                if p not in seen:
                    seen.add(p)
                    syms.append(p)
            if max_symbols is not None and len(syms) > max_symbols:
                raise VocabError(f"{path}: more than {max_symbols} "
                                 "symbols, the checkpoint's vocabulary: "
                                 "not the corpus it was trained on")
    try:
        with open_input(path) as raw, \
                io.TextIOWrapper(raw, encoding="utf-8") as f:
            pending, open_line = "", False
            while True:
                chunk = f.readline(CHUNK)
                if not chunk:
                    break
                open_line = True
                parts = (pending + chunk).split()
                pending = ""
                if not chunk[-1].isspace() and parts:
                    pending = parts.pop()      # goes on in the next chunk
                    if len(pending) > MAX_SYMBOL:
                        raise VocabError(
                            f"{path}: {len(pending)} characters without "
                            f"whitespace, more than a symbol's {MAX_SYMBOL}"
                            ": not a prepared corpus")
                add(parts)
                if chunk.endswith("\n"):
                    add(["<eos>"])
                    open_line = False
            if open_line:
                add(([pending] if pending else []) + ["<eos>"])
    except (OSError, UnicodeDecodeError) as e:
        raise VocabError(f"{path}: {getattr(e, 'strerror', None) or e}")
    return syms


def corpus_vocab(path, dataset=None, max_symbols=None):
    """The vocabulary of the adaptive-span code's data.Dictionary over the
    prepared training corpus at path (train.txt): corpus_symbols(), with
    the conventions of its enwik8 or text8 (dataset; None: told by the
    symbols, byte values or characters) where a newline is <eos>."""
    syms = corpus_symbols(path, max_symbols)
    rest = [s for s in syms if s != "<eos>"]
    if dataset is None:
        if rest and all(s.isascii() and s.isdigit() for s in rest):
            dataset = "enwik8"
        elif all(len(s) == 1 for s in rest):
            dataset = "text8"
        else:
            raise VocabError(f"{path}: neither byte values (enwik8) nor "
                             "characters (text8): not a prepared corpus of "
                             "either (give --dataset)")
    if dataset not in ("enwik8", "text8"):
        raise VocabError(f"--dataset {dataset}: an adaptive-span corpus is "
                         "enwik8 or text8")
    # text8 is lower case: upper case, which it lacks, read as lower case
    lower = dataset == "text8" and not any(s != s.lower() for s in rest)
    return Vocabulary(syms, lower, None, dataset, None, path, "eos")


def check(proto, source):
    """SentencePiece accepts the model."""
    sp = sentencepiece().SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception as e:               # noqa: BLE001
        raise VocabError(f"{source}: SentencePiece refuses the vocabulary "
                         f"({e})")


def main(argv=None):
    ap = OneLineParser(prog="vocab.py", description="Write the "
                       "SentencePiece model of an original vocabulary.")
    ap.add_argument("vocab")
    ap.add_argument("--dataset", choices=sorted(DATASETS))
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    try:
        proto, meta = to_spm(read_vocab(a.vocab, a.dataset))
        try:
            with open(a.output, "wb") as f:
                f.write(proto)
        except OSError as e:
            raise VocabError(f"{a.output}: {e.strerror or e}")
    except InputError as e:
        print(f"vocab.py: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:             # noqa: BLE001 (one line, not a trace)
        print(f"vocab.py: {a.vocab}: unexpected {type(e).__name__}: "
              f"{str(e)[:200]} (a bug: please report it with the file)",
              file=sys.stderr)
        return 1
    print(" ".join(f"{k}={v}" for k, v in meta.items()))
    return 0
