#!/usr/bin/python3
"""Seed corpora for the libFuzzer harnesses of tests/fuzz (see README).

    make-seeds.py -o DIR --txlgen BUILD/cmd/txlgen

writes
  DIR/model/      tiny valid models (n_layer 1, d_model 8: fast to load and
                  run) in every variant the loader handles (F32/F16/BF16,
                  pre_lnorm, untie_r, d_embed != d_model with and without
                  tied projections, untied output, same_length, clamp_len,
                  unaligned), and every broken file of tests/test_badfiles.py
                  made from a tiny 2-layer model; and models of d_head 32
                  (d_model 32, so that matrices can be blocks of 32) with
                  weights in every storage type (F32, F16, BF16, Q8_0,
                  Q4_0), each in five sizes (header padding) that make
                  fuzz-model's session use each kv_type; and a Q4_K model
                  of rows 128 long, also with a negative and a NaN scale
  DIR/state-model.bin  the model the state seeds belong to
                  (TXL_FUZZ_STATE_MODEL for fuzz-state), of d_head 32
  DIR/state/      memory states txlgen saved (txl_session_save) for it,
                  in every kv_type
  DIR/config/     JSON configs: txlgen --print-config and a few by hand
  DIR/sampler/    sampler settings and logits, finite, inf and NaN
  DIR/tokenizer/  inputs of fuzz-tokenizer: real SentencePiece protos WITH
                  their normalisation tables (tests/data/spm.model's
                  nmt_nfkc, an identity and an nfkc_cf model trained here,
                  and models/vocab.py's word, text8 and enwik8 tables)
                  with the vocabulary metadata each goes with, and texts

The models carry tests/data/spm.model without its 240 KB normalisation
table (identity normalisation then) and, but for one, without its 256 byte
pieces, so that inputs stay ~5 KB and mutations land in what libtxl
parses.  Run with Debian's /usr/bin/python3 (python3-torch); nothing
here is committed, it is made at run time.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import srctree  # noqa: F401,E402 (models/ on sys.path)
import test_badfiles as tb                            # noqa: E402 (tests/)
from txlgen import conventions, loadable, proto  # noqa: E402
from txlgen import random_model as mrm, vocab as V  # noqa: E402

TINY = dict(n_layer=1, d_model=8, n_head=2, d_head=4, d_inner=16,
            tgt_len=4, mem_len=4)
# d_head 32: the smallest model whose matrices can be Q8_0 and Q4_0 and
# whose memory can be too
HEAD32 = dict(n_layer=1, d_model=32, n_head=1, d_head=32, d_inner=32,
              tgt_len=4, mem_len=4)
# the types of blocks of 1 or 32 values (all but Q4_K and the bytes type)
DTYPES = tuple(n for n, (block, _) in loadable.storage_types().items()
               if n != conventions.BYTES_TYPE and block in (1, 32))
# rows 128 long: the smallest model whose matrices can be Q4_K
ROW128 = dict(n_layer=1, d_model=128, n_head=1, d_head=32, d_inner=128,
              tgt_len=4, mem_len=4)
KV_TYPES = DTYPES      # fuzz-model: the kv_type of (size / 2) % 5

VARIANTS = {
    "f32": {},
    "f16": dict(dtype="F16"),
    "bf16": dict(dtype="BF16"),
    "pre_lnorm": dict(pre_lnorm=True),
    "untie_r": dict(untie_r=True, n_layer=2),
    "untied_out": dict(tie_weight=False),
    "d_embed": dict(d_embed=4),
    "d_embed_tie_projs": dict(d_embed=4, tie_projs=True),
    "same_length": dict(same_length=True),
    "clamp_len": dict(clamp_len=2, mem_len=6),
    "no_mem": dict(mem_len=0),
}


def slim_tokenizer(src, dst):
    """ModelProto without normalizer_spec.precompiled_charsmap (3.2) and
    self_test_data (4)."""
    with open(src, "rb") as f:
        b = f.read()
    out = proto.edit(proto.edit(b, 4, lambda v: None), 3,
                     lambda spec: proto.edit(spec, 2, lambda v: None))
    with open(dst, "wb") as f:
        f.write(out)
    if mrm.vocab_size(dst) != mrm.vocab_size(src):
        raise RuntimeError("slimmed tokenizer lost pieces")


def tiny_tokenizer(src, dst):
    """The slimmed ModelProto without its 256 byte pieces (type BYTE, 6)
    and without byte fallback (TrainerSpec field 35): 64 pieces, so that a
    model's embedding and output layer are 5 times smaller, and the
    committed corpus with them."""
    def byte_piece(piece):
        return None if any(n == 3 and v == 6
                           for n, _, v, _ in proto.fields(piece)) else piece

    with open(src, "rb") as f:
        b = f.read()
    out = proto.edit(proto.edit(b, 1, byte_piece), 2,
                     lambda spec: proto.edit(spec, 35, lambda v: None))
    with open(dst, "wb") as f:
        f.write(out)
    if mrm.vocab_size(dst) != mrm.vocab_size(src) - 256:
        raise RuntimeError("tiny tokenizer: unexpected vocabulary")


def with_kv_type(blob, kv):
    """The model file with its header padded (by 64 bytes at a time, so
    that the data stays aligned) to a size whose (size / 2) % 5 is kv."""
    header, data = tb.split(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    for k in range(5):
        out = tb.assemble(raw + b" " * (64 * k), data)
        if len(out) // 2 % 5 == kv:
            return out
    raise RuntimeError("no padding gives kv_type %d" % kv)


def build(tmp, name, tok, base=TINY, **kw):
    cfg = dict(base)
    cfg.update(kw)
    dtype = cfg.pop("dtype", "F32")
    rm = mrm.build(os.path.join(tmp, name), dtype=dtype, tokenizer=tok,
                   **cfg)
    with open(rm.path, "rb") as f:
        return f.read()


TEXTS = [b"Hello, world!  \xc3\xa9t\xc3\xa9 \xef\xbc\xa1 \xff\xfe 42\n",
         b" = The cat = \n\n the cat sat , on @-@ the mat \n",
         "ﬁ ½ ＡＢＣ 日本語 🙂\t\u00a0x\r\n".encode(), b"\x00\x01abc\n\n"]


def tokenizer_seeds(tmp, put):
    """fuzz-tokenizer inputs: mode byte, u32 proto length, proto, text."""
    import io
    import sentencepiece as spm
    protos = {}
    with open(mrm.TOKENIZER, "rb") as f:
        protos["nmt_nfkc"] = (0, f.read())
    with open(os.path.join(mrm.DATA, "text.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    for rule in ("identity", "nfkc_cf"):
        w = io.BytesIO()
        # from an iterator: an input file's path would be kept in the
        # proto's trainer_spec, and so in the committed corpus
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=w,
            vocab_size=400, hard_vocab_limit=False,
            normalization_rule_name=rule,
            byte_fallback=rule == "identity", minloglevel=3)
        protos[rule] = (0, w.getvalue())
    words = ["<eos>", "the", "cat", "<unk>", "The", "sat", ",", "@-@"]
    for name, mode, v in (
            ("wt103", 1, V.Vocabulary(words, False, None, "wt103", None,
                                      "x")),
            ("ptb", 1, V.Vocabulary(words, True, None, "ptb", None, "x")),
            ("lm1b", 2, V.Vocabulary(["<S>", "</S>", "<UNK>", "a"], False,
                                     None, "lm1b", 2, "x")),
            ("text8", 4, V.Vocabulary(list("_abcdefghijklmnopqrstuvwxyz"),
                                      True, None, "text8", None, "x")),
            ("enwik8", 4, V.Vocabulary([str(b) for b in range(32, 127)],
                                       True, None, "enwik8", None, "x"))):
        protos[name] = (mode, V.to_spm(v)[0])
    for name, (mode, proto) in protos.items():
        for k, text in enumerate(TEXTS):
            put("tokenizer", f"{name}-{k}.bin", bytes([mode]) +
                struct.pack("<I", len(proto)) + proto + text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--outdir", required=True)
    ap.add_argument("--txlgen", required=True, help="a built txlgen")
    a = ap.parse_args()
    out = a.outdir
    for d in ("model", "state", "config", "sampler", "tokenizer"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="txl-fuzz-seeds-")
    try:
        full = os.path.join(tmp, "tok.model")
        slim_tokenizer(mrm.TOKENIZER, full)
        tok = os.path.join(tmp, "tiny.model")
        tiny_tokenizer(full, tok)

        def put(sub, name, blob):
            with open(os.path.join(out, sub, name), "wb") as f:
                f.write(blob)

        for name, kw in VARIANTS.items():
            blob = build(tmp, name, tok, **kw)
            put("model", name + ".bin", blob)
            if name == "f32":
                put("model", "unaligned.bin", tb.unaligned(blob))
        # d_head 32: every storage type of the weights, each with every
        # kv_type of the memory
        for dt in DTYPES:
            blob = build(tmp, "h32-" + dt, tok, base=HEAD32, dtype=dt)
            if dt == "F32":
                base = blob
            for kv, kv_name in enumerate(KV_TYPES):
                put("model", f"head32-{dt}-kv{kv_name}.bin".lower(),
                    with_kv_type(blob, kv))
        # Q4_K's super-blocks of 128; one with a negative block scale
        # and one with a NaN one (refused)
        blob = build(tmp, "r128-q4_k", tok, base=ROW128, dtype="Q4_K")
        put("model", "row128-q4_k.bin", blob)
        header, data = tb.split(blob)
        b = header["layers.0.pos_ff.CoreNet.0.weight"]["data_offsets"][0]
        for name, d in (("negative", 0xbc00), ("nan", 0x7e00)):
            put("model", f"row128-q4_k-{name}-scale.bin", tb.assemble(
                header, data[:b + 72] + struct.pack("<H", d) +
                data[b + 74:]))
        # the byte pieces (<0xNN>) and byte fallback, in one model
        put("model", "byte_pieces.bin", build(tmp, "bytes", full))

        # tests/test_badfiles.py's corpus (its cases name layers.1.*)
        blob = build(tmp, "bad2", tok, n_layer=2)
        tb._tmp = tmp
        shutil.copy(os.path.join(tmp, "bad2", "m.bin"),
                    os.path.join(tmp, "valid.bin"))
        header, data = tb.split(blob)
        for name, (make, _) in tb.CASES.items():
            bad = make(blob, header, data)
            if len(bad) < (1 << 20):   # not the 16 MB header
                put("model", "bad-" + name + ".bin", bad)

        # states of the f32 model, saved by txlgen (txl_session_save)
        smodel = os.path.join(out, "state-model.bin")
        with open(smodel, "wb") as f:
            f.write(base)
        runs = {"fill3": ["--mem-len", "8", "--text", "Hi", "-n", "1"],
                "full": ["--mem-len", "8", "--text",
                         "Hello world, a longer text.", "-n", "4"],
                "mem4": ["--mem-len", "4", "--text", "Hello there", "-n",
                         "2"]}
        for kv in KV_TYPES:
            for name, args in runs.items():
                if kv != "F32" and name == "mem4":
                    continue
                state = os.path.join(out, "state",
                                     f"{name}-{kv.lower()}.state")
                r = subprocess.run([a.txlgen, "--model", smodel,
                                    "--seg-len", "4", "--seed", "1",
                                    "--kv-type", kv, "--state-out", state]
                                   + args, capture_output=True, text=True,
                                   stdin=subprocess.DEVNULL)
                if r.returncode != 0:
                    raise RuntimeError(f"txlgen {args}: {r.stderr.strip()}")
        # one saying kv_type 5, which no session has
        with open(os.path.join(out, "state", "fill3-f32.state"), "rb") as f:
            blob = bytearray(f.read())
        blob[56:60] = (5).to_bytes(4, "little")
        put("state", "kv5.state", bytes(blob))

        # configs
        r = subprocess.run([a.txlgen, "--model", smodel, "--print-config"],
                           capture_output=True, text=True, check=True)
        put("config", "print-config.json", r.stdout.encode())
        hand = {
            "sampling": {"temp": 0.7, "top_k": 10, "top_p": 0.9,
                         "min_p": 0.1, "repeat_penalty": 1.2,
                         "repeat_last_n": 32, "seed": 42},
            "nulls": {"mem_len": None, "seg_len": None, "clamp_len": None,
                      "same_length": None, "seed": None, "model": None},
            "lists": {"stop": ["\n\n", "THE END"], "prime": "a.txt",
                      "color": "always", "json": True},
            "strings": {"model": "m.bin", "text": "h\u00e9llo \\ \"q\"",
                        "state_in": "s", "state_out": "t",
                        "n_predict": -1},
        }
        for name, obj in hand.items():
            put("config", name + ".json", json.dumps(obj, indent=1).encode())

        # sampler: temp (even first byte: not greedy), top_k, top_p, min_p,
        # penalty, last_n, then the logits
        inf, nan = float("inf"), float("nan")
        logits = {"finite": [0.5, -1.0, 2.0, 0.0, 3.5, -7.0, 1.0, 0.25],
                  "pos_inf": [0.5, inf, 2.0, inf, -1.0],
                  "neg_inf": [-inf] * 6,
                  "nan": [nan] * 5,
                  "mixed": [nan, 1.0, -inf, inf, nan, 0.0, 3.0]}
        for name, lg in logits.items():
            put("sampler", name + ".bin",
                struct.pack("<fifff", 0.75, 3, 0.9, 0.05, 1.3) +
                struct.pack("<i", 8) + struct.pack(f"<{len(lg)}f", *lg))
        tokenizer_seeds(tmp, put)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n = {d: len(os.listdir(os.path.join(out, d)))
         for d in ("model", "state", "config", "sampler", "tokenizer")}
    print(f"seeds in {out}: {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
