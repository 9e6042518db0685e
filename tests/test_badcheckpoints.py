#!/usr/bin/python3
"""Hostile checkpoints and model files for the converter: models/convert.py
and models/txlfile.py refuse each with exactly one line on stderr
(`convert.py: FILE: ...`, `txlfile.py: FILE: ...`) that names the file and
the problem, exit status 3, nothing on stdout, no output file and no
traceback, and they allocate by what the file holds, not by what it
declares.

Every case is made byte by byte (tests/forge.py: pickles opcode by
opcode, torch.save's zip and legacy containers, safetensors files, Hugging
Face directories), and run as a user runs the programs, with Debian's
/usr/bin/python3, under a parent that reports the child's peak resident
memory (getrusage): it must stay under MAX_RSS, where an unbounded
converter took gigabytes (a 3 MB zip whose storage inflates to 3 GiB:
6.5 GB; a 504-byte file with a 4-byte storage read as 5e8 floats through
a zero stride: 2.2 GB; a 10-byte pickle whose memo index is 2^26: 1 GB).
A programming error the cases do not foresee still ends in one line (the
catch-all, tested by making a function fail).

No torch: this runs where the converter runs.  Run:
/usr/bin/python3 tests/test_badcheckpoints.py
"""

import contextlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen.conventions import REL_PARTIAL  # noqa: E402
import forge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERT = os.path.join(ROOT, "models", "convert.py")
TXLFILE = os.path.join(ROOT, "models", "txlfile.py")
TOKENIZER = os.path.join(ROOT, "tests", "data", "spm.model")   # 320 pieces
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable

# Peak resident memory allowed (KiB): Python and numpy take ~35 MB; the
# cases above took gigabytes before the converter bounded them.
MAX_RSS = 80 << 10

# Runs argv[1:] as a child and prints its peak resident memory last.
MEASURE = """
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:])
print("maxrss", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
      file=sys.stderr)
sys.exit(r.returncode)
"""

# A model of the tests' tokenizer, small enough for anything to fit.
CONFIG = dict(n_token=320, n_layer=1, n_head=1, d_model=4, d_head=4,
              d_inner=4, tgt_len=4, mem_len=4)

TMP = None


def setUpModule():
    global TMP
    TMP = tempfile.mkdtemp(prefix="txl-badckpt-")
    unittest.addModuleCleanup(shutil.rmtree, TMP, ignore_errors=True)


def path(name):
    return os.path.join(TMP, name)


def run(program, *args, timeout=120):
    """(exit status, stdout, stderr lines, peak RSS in KiB) of program."""
    r = subprocess.run([PYTHON, "-c", MEASURE, PYTHON, program, *args],
                       capture_output=True, text=True, timeout=timeout)
    lines = r.stderr.splitlines()
    rss = int(lines.pop().split()[1])
    return r.returncode, r.stdout, lines, rss


def write_json(name, obj_or_text):
    p = path(name)
    with open(p, "w") as f:
        f.write(obj_or_text if isinstance(obj_or_text, str)
                else json.dumps(obj_or_text))
    return p


def hf_dir(name, config, weights=None):
    """A Hugging Face directory: config.json (a dict, or raw text) and
    weights = (file name, writer(path))."""
    d = path(name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
    if weights:
        weights[1](os.path.join(d, weights[0]))
    return d


HF_CONFIG = dict(vocab_size=320, n_layer=1, n_head=1, d_model=4, d_head=4,
                 d_inner=4, d_embed=4, div_val=1, cutoffs=[], tgt_len=4,
                 mem_len=4, untie_r=False)


def hf(name, **changes):
    return hf_dir(name, dict(HF_CONFIG, **changes))


def one_tensor(size, stride, numel, offset=0, key="0"):
    p = forge.Pickle()
    p.state_dict({"w": p.tensor(key, numel, size, stride, offset)})
    return p.done()


def legacy(name, pkl, storages, keys=None):
    forge.legacy_checkpoint(path(name), pkl, storages, keys)
    return path(name)


def zipped(name, pkl, storages, compressed=()):
    forge.zip_checkpoint(path(name), pkl, storages, compressed)
    return path(name)


def state_args(weights):
    return ["--weights", weights, "--config", write_json("cfg.json", CONFIG),
            "--tokenizer", TOKENIZER]


def model_modules(p, emb_attrs=None, extra=None):
    """The _modules of a MemTransformerLM with the submodules its
    hyperparameters are read from (no tensors), and extra ones."""
    mt = "mem_transformer."
    layer = p.standin(mt + "RelPartialLearnableDecoderLayer", {"_modules": {
        "dec_attn": p.standin(mt + "RelPartialLearnableMultiHeadAttn",
                              {"pre_lnorm": False}),
        "pos_ff": p.standin(mt + "PositionwiseFF", {"d_inner": 4})}})
    return dict({
        "word_emb": p.standin(mt + "AdaptiveEmbedding", dict(
            dict(cutoffs=[320], div_val=1), **(emb_attrs or {}))),
        "crit": p.standin("proj_adaptive_softmax.ProjectedAdaptiveLogSoftmax",
                          {}),
        "layers": p.standin("torch.nn.modules.container.ModuleList",
                            {"_modules": {"0": layer}})}, **(extra or {}))


def whole_model(name, model_attrs, emb_attrs=None, modules=None):
    """A whole-model pickle of a MemTransformerLM with these attributes,
    an AdaptiveEmbedding with emb_attrs, and _modules (default:
    model_modules())."""
    p = forge.Pickle()
    attrs = dict(n_token=320, n_layer=1, n_head=1, d_model=4, d_head=4,
                 d_embed=4, **model_attrs)
    attrs["_modules"] = modules(p) if modules else \
        model_modules(p, emb_attrs)
    p.push(p.standin("mem_transformer.MemTransformerLM", attrs))
    return zipped(name, p.done(), {})


def self_referencing_model(name):
    """A MemTransformerLM whose _modules holds itself."""
    p = forge.Pickle()
    p.new("mem_transformer.MemTransformerLM")
    p.put(1)
    p.build(dict(n_token=320, n_layer=1, n_head=1, d_model=4, d_head=4,
                 d_embed=4, _modules=model_modules(p, extra={
                     "again": p.get(1)})))
    return zipped(name, p.done(), {})


def nested_dicts(name, depth):
    """{"model": {"model": ... {"w": tensor}}} depth deep."""
    p = forge.Pickle()
    for _ in range(depth):
        p.op(b"}").push("model")
    p.state_dict({"w": p.tensor("0", 4, [4], [1])})
    p.op(b"s" * depth)
    return zipped(name, p.done(), {"0": bytes(16)})


def one_storage_many_tensors(name):
    """Every matrix of a 32-layer model a view of one 3 MB storage: 100
    MB of tensors from a 3 MB file."""
    cfg = dict(n_token=320, n_layer=32, n_head=1, d_model=512, d_head=512,
               d_inner=512, tgt_len=4, mem_len=4)
    numel = 3 * 512 * 512
    p = forge.Pickle()

    def view(*size):
        stride = [size[1], 1] if len(size) == 2 else [1]
        return p.tensor("0", numel, size, stride)
    state = {"word_emb.emb_layers.0.weight": view(320, 512),
             "crit.out_layers.0.bias": view(320),
             "r_w_bias": view(1, 512), "r_r_bias": view(1, 512)}
    for i in range(32):
        for t, shape in (("dec_attn.qkv_net.weight", (1536, 512)),
                         ("dec_attn.r_net.weight", (512, 512)),
                         ("dec_attn.o_net.weight", (512, 512)),
                         ("pos_ff.CoreNet.0.weight", (512, 512)),
                         ("pos_ff.CoreNet.3.weight", (512, 512))):
            state[f"layers.{i}.{t}"] = view(*shape)
        for t in ("dec_attn.layer_norm.weight", "dec_attn.layer_norm.bias",
                  "pos_ff.CoreNet.0.bias", "pos_ff.CoreNet.3.bias",
                  "pos_ff.layer_norm.weight", "pos_ff.layer_norm.bias"):
            state[f"layers.{i}.{t}"] = view(512)
    p.state_dict(state)
    weights = zipped(name, p.done(), {"0": bytes(4 * numel)})
    return ["--weights", weights, "--config",
            write_json(name + ".json", cfg), "--tokenizer", TOKENIZER]


def safetensors_dir(name, header, data=b"", header_len=None):
    return hf_dir(name, HF_CONFIG, ("model.safetensors",
                                    lambda p: forge.safetensors(
                                        p, header, data, header_len)))


def values_dir(name, value, f64=False):
    """A Hugging Face directory of a model of d_model 32 (so that its
    matrices may be Q8_0) whose first attention matrix holds value (as
    F64 if f64, else F32), every other value zero."""
    import numpy as np
    from txlgen import loadable
    hp = dict(n_token=320, n_layer=1, n_head=1, d_model=32, d_head=4,
              d_inner=32, d_embed=32, div_val=1, cutoffs=[],
              tie_projs=[False], tie_weight=True, untie_r=False,
              attn_type=REL_PARTIAL, tgt_len=4, mem_len=4, max_klen=8)
    big = "layers.0.dec_attn.qkv_net.weight"
    header, data = {}, b""
    for k, (shape, _) in loadable.tensors(hp).items():
        a = np.zeros(shape, np.float64 if f64 and k == big else np.float32)
        if k == big:
            a.flat[0] = value
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[k] = {"dtype": "F64" if a.dtype == np.float64 else "F32",
                     "shape": list(shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    cfg = dict({k: v for k, v in hp.items() if k not in ("n_token",
                                                         "max_klen")},
               vocab_size=320)
    return hf_dir(name, cfg, ("model.safetensors", lambda p:
                              forge.safetensors(p, header, data)))


def deep_json(depth):
    return '{"vocab_size": 320, "x": ' + "[" * depth + "]" * depth + "}"


# name -> (function returning convert.py's arguments, the file the line
#          must name (None: the --weights argument), phrase it must match)
CASES = {
    # bounded allocation
    "zip bomb: a 3 MB storage inflating to 3 GiB": (
        lambda: state_args(bomb()), None, "more than the file holds"),
    "a compressed storage": (
        lambda: state_args(zipped("cdata.pt", one_tensor([4], [1], 4),
                                  {"0": bytes(16)},
                                  compressed=("archive/data/0",))), None,
        "compressed"),
    "504 bytes: a 4-byte storage as 5e8 floats, stride 0": (
        lambda: state_args(legacy("stride0.pt", one_tensor(
            [500_000_000], [0], 1), {"0": (1, bytes(4))})), None,
        "zero stride"),
    "a 4-byte storage as 3e9 floats, stride 0": (
        lambda: state_args(legacy("stride0b.pt", one_tensor(
            [3_000_000_000], [0], 1), {"0": (1, bytes(4))})), None,
        "zero stride"),
    "overlapping strides: 1e6 values over a storage of 2000": (
        lambda: state_args(zipped("overlap.pt", one_tensor(
            [1000, 1000], [1, 1], 2000), {"0": bytes(8000)})), None,
        "larger than its storage"),
    "a view past the end of its storage": (
        lambda: state_args(zipped("past.pt", one_tensor(
            [10], [1], 10, offset=5), {"0": bytes(40)})), None,
        "outside its storage"),
    "a legacy storage of 2^30 floats in a small file": (
        lambda: state_args(legacy("big.pt", one_tensor([4], [1], 1 << 30),
                                  {"0": (1 << 30, bytes(16))})), None,
        "the file holds"),
    "one storage read as 100 MB of tensors": (
        lambda: one_storage_many_tensors("many.pt"), None,
        "more than the file's storages"),
    "a storage bigger than the zip entry": (
        lambda: state_args(zipped("short.pt", one_tensor([8], [1], 8),
                                  {"0": bytes(16)})), None,
        "holds 16 bytes, not 32"),
    "data.pkl compressed": (
        lambda: state_args(zipped("cpkl.pt", one_tensor([4], [1], 4),
                                  {"0": bytes(16)},
                                  compressed=("archive/data.pkl",))), None,
        "compressed"),
    # one line, not a traceback
    "a legacy storage count of 2^61": (
        lambda: state_args(legacy("count.pt", one_tensor([4], [1], 1 << 61),
                                  {"0": (1 << 61, bytes(16))})), None,
        "the file holds"),
    "BUILD on a tensor, setting _t": (
        lambda: state_args(build_on_tensor()), None, "state of a tensor"),
    "self-referencing _modules": (
        lambda: ["--weights", self_referencing_model("selfref.pt"),
                 "--tokenizer", TOKENIZER], None, "more than once|cycle"),
    "HF config.json nested 100,000 deep": (
        lambda: ["--weights", hf_dir("deep", deep_json(100_000))],
        "config.json", "nested"),
    "HF cutoffs: 5": (
        lambda: ["--weights", hf("cut5", cutoffs=5)], "config.json",
        "cutoffs.*list"),
    "HF layer_norm_epsilon: \"x\"": (
        lambda: ["--weights", hf("eps", layer_norm_epsilon="x")],
        "config.json", "layer_norm_epsilon.*number"),
    "HF sample_softmax: \"x\"": (
        lambda: ["--weights", hf("ss", sample_softmax="x")], "config.json",
        "sample_softmax.*integer"),
    "a safetensors header that is a list": (
        lambda: ["--weights", safetensors_dir("stlist", [1, 2])],
        "model.safetensors", "not a JSON object"),
    "safetensors: shape [3] over 4 bytes": (
        lambda: ["--weights", safetensors_dir("st3", {"w": {
            "dtype": "F32", "shape": [3], "data_offsets": [0, 4]}},
            bytes(4))], "model.safetensors", r"shape \[3\].*12 bytes"),
    "torch zip: shape [3] over a storage of 1": (
        lambda: state_args(zipped("z3.pt", one_tensor([3], [1], 1),
                                  {"0": bytes(4)})), None,
        "larger than its storage"),
    # values no storage type holds, with numpy's warnings on (one line)
    "a weight of 1e300 in an F64 tensor": (
        lambda: ["--weights", values_dir("f64", 1e300, f64=True),
                 "--tokenizer", TOKENIZER], None, "NaN or infinite"),
    "a weight of 1e38 stored as Q8_0": (
        lambda: ["--weights", values_dir("q8", 1e38), "--tokenizer",
                 TOKENIZER, "--dtype", "Q8_0"], None,
        "too large for an F16 scale"),
    "a weight of 1e5 stored as F16": (
        lambda: ["--weights", values_dir("f16", 1e5), "--tokenizer",
                 TOKENIZER, "--dtype", "F16"], None, "too large for F16"),
    # the same kinds, elsewhere
    "safetensors: two tensors on the same bytes": (
        lambda: ["--weights", safetensors_dir("stoverlap", {
            "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
            "b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
            bytes(16))], "model.safetensors", "overlap"),
    "safetensors: a header longer than the file": (
        lambda: ["--weights", safetensors_dir("stlong", b"{}", b"",
                                              1 << 40)],
        "model.safetensors", "longer than the file"),
    "safetensors: a shape of 33 dimensions": (
        lambda: ["--weights", safetensors_dir("st33", {"w": {
            "dtype": "F32", "shape": [1] * 33, "data_offsets": [0, 4]}},
            bytes(4))], "model.safetensors", "shape"),
    "safetensors: a shape [0, 2^64]": (
        lambda: ["--weights", safetensors_dir("st64", {"w": {
            "dtype": "F32", "shape": [0, 2 ** 64], "data_offsets": [0, 0]}})],
        "model.safetensors", "shape"),
    "safetensors: a shape [0, 2^61] (the fuzzer's)": (
        lambda: ["--weights", safetensors_dir("st61", {"w": {
            "dtype": "F32", "shape": [0, 2 ** 61], "data_offsets": [0, 0]}})],
        "model.safetensors", "shape"),
    "torch zip: a tensor of size [0, 2^61]": (
        lambda: state_args(zipped("z61.pt", one_tensor([0, 2 ** 61], [1, 1],
                                                       1), {"0": bytes(4)})),
        None, "too large for any file"),
    "torch zip: a tensor of 33 dimensions": (
        lambda: state_args(zipped("z33.pt", one_tensor([1] * 33, [1] * 33, 1),
                                  {"0": bytes(4)})), None, "33 dimensions"),
    "safetensors: a dtype that is a list": (
        lambda: ["--weights", safetensors_dir("stdt", {"w": {
            "dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}},
            bytes(4))], "model.safetensors", "dtype"),
    "safetensors: data_offsets of strings": (
        lambda: ["--weights", safetensors_dir("stoff", {"w": {
            "dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}},
            bytes(4))], "model.safetensors", "data_offsets"),
    "--config nested 100,000 deep": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("deep.json", deep_json(100_000)),
                 "--tokenizer", TOKENIZER], "deep.json", "nested"),
    "--config n_layer \"2\"": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("str.json", dict(CONFIG, n_layer="2")),
                 "--tokenizer", TOKENIZER], "str.json", "n_layer.*integer"),
    "--config tie_projs 3": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("tp.json", dict(CONFIG, tie_projs=3)),
                 "--tokenizer", TOKENIZER], "tp.json", "tie_projs.*list"),
    "--config layer_norm_eps 0": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("eps.json", dict(CONFIG, layer_norm_eps=0)),
                 "--tokenizer", TOKENIZER], "eps.json",
        r"layer_norm_eps is 0, expected a number in \(0, 1\]"),
    "--config same_length_mask \"tensorflow\"": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("slm.json", dict(CONFIG,
                                             same_length_mask="tensorflow")),
                 "--tokenizer", TOKENIZER], "slm.json",
        "same_length_mask.*one of pytorch, tf"),
    "HF layer_norm_epsilon: 0": (
        lambda: ["--weights", hf("eps0", layer_norm_epsilon=0)],
        "config.json", r"layer_norm_epsilon 0 is not in \(0, 1\]"),
    "--config a list": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("list.json", [1]), "--tokenizer", TOKENIZER],
        "list.json", "JSON object"),
    "whole model: AdaptiveEmbedding.cutoffs 5": (
        lambda: ["--weights", whole_model("wcut.pt", {}, {"cutoffs": 5}),
                 "--tokenizer", TOKENIZER], None, "cutoffs"),
    "whole model: sample_softmax \"x\"": (
        lambda: ["--weights", whole_model("wss.pt", {"sample_softmax": "x"}),
                 "--tokenizer", TOKENIZER], None, "sample_softmax"),
    "whole model: _modules a list": (
        lambda: ["--weights", whole_model("wmods.pt", {},
                                          modules=lambda p: [1, 2]),
                 "--tokenizer", TOKENIZER], None, "_modules"),
    "state dicts nested 10,000 deep": (
        lambda: state_args(nested_dicts("nested.pt", 10_000)), None,
        "neither a state_dict"),
    "a legacy storage key list nested 100,000 deep": (
        lambda: state_args(legacy_nested_keys("keys.pt", 100_000)), None,
        "storage list"),
    "a memo index of 2^26 in data.pkl (LONG_BINPUT: 10 bytes, 1 GB)": (
        lambda: state_args(zipped("memo.pt", b"\x80\x02Nr" + struct.pack(
            "<I", 1 << 26) + b".", {})), None, "memo index 67108864"),
    "a memo index of 10^9 in a pickle (PUT)": (
        lambda: state_args(raw_file("put.pt", b"\x80\x02Np 1_000_000_000\n.")),
        None, "memo index 1000000000"),
    "a memo index of 10^7 before a NUL (PUT; the fuzzer's)": (
        lambda: state_args(raw_file("putnul.pt", b"\x80\x02Np 1_000_000_0"
                                    b"\x00\x7f\xff0\n.")),
        None, "memo index 10000000"),
    "a legacy file framed as 2^40 bytes": (
        lambda: state_args(raw_file("frame.pt", b"\x80\x04\x95" +
                                    struct.pack("<Q", 1 << 40) + b"N.")),
        None, "truncated"),
    "BYTEARRAY8 of 2^62 bytes in data.pkl": (
        lambda: state_args(zipped("ba8.pt", b"\x80\x02\x96" +
                                  struct.pack("<Q", 1 << 62) + b"x.", {})),
        None, "BYTEARRAY8"),
    "a zip end record that spans disks": (
        lambda: state_args(raw_file("disks.pt", b"\x80\x02N" + struct.pack(
            "<4sLQL", b"PK\x06\x07", 0, 0, 2) + struct.pack(
            "<4s4H2LH", b"PK\x05\x06", 0, 0, 0, 0, 0, 0, 0))), None,
        "bad torch zip archive"),
    "--weights a FIFO": (
        lambda: state_args(fifo("w.fifo")), None, "not a regular file"),
    "--config a FIFO": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 fifo("c.fifo"), "--tokenizer", TOKENIZER], "c.fifo",
        "not a regular file .a FIFO"),
    "--tokenizer a directory": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("cfg.json", CONFIG), "--tokenizer", TMP],
        "--tokenizer", "not a regular file .a directory"),
    "--vocab a device": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("cfg.json", CONFIG), "--vocab", "/dev/zero"],
        "/dev/zero", "not a regular file .a device"),
    "a legacy storage key of 5,000 digits": (
        lambda: state_args(legacy("bigkey.pt", one_tensor([4], [1], 4),
                                  {"0": (4, bytes(16))}, keys=[10 ** 5000])),
        None, "bad storage list"),
    "a negative storage size": (
        lambda: state_args(legacy("neg.pt", one_tensor([4], [1], -4),
                                  {"0": (4, bytes(16))})), None,
        "storage size"),
    "a tensor size of strings": (
        lambda: state_args(zipped("strsize.pt", one_tensor(["4"], [1], 4),
                                  {"0": bytes(16)})), None, "size"),
    "vocab.pkl: idx2sym 5": (
        lambda: ["--weights", zipped("ok.pt", one_tensor([4], [1], 4),
                                     {"0": bytes(16)}), "--config",
                 write_json("cfg.json", CONFIG), "--vocab", vocab_pkl()],
        "vocab.pkl", "idx2sym"),
}


def raw_file(name, data):
    with open(path(name), "wb") as f:
        f.write(data)
    return path(name)


def fifo(name):
    """A FIFO with no writer: opening it to read waits for one."""
    if not os.path.exists(path(name)):
        os.mkfifo(path(name))
    return path(name)


def bomb():
    p = forge.Pickle()
    n = 3 << 28                                   # 3 GiB of floats
    p.state_dict({"word_emb.emb_layers.0.weight": p.tensor("0", n, [n],
                                                            [1])})
    forge.zip_bomb_checkpoint(path("bomb.pt"), p.done(), "0", 4 * n)
    return path("bomb.pt")


def build_on_tensor():
    p = forge.Pickle()
    p.state_dict({"w": lambda: (p.tensor("0", 4, [4], [1])(),
                                p.build({"_t": 5}))})
    return zipped("build.pt", p.done(), {"0": bytes(16)})


def vocab_pkl():
    p = forge.Pickle()
    p.dict({"idx2sym": 5})
    with open(path("vocab.pkl"), "wb") as f:
        f.write(p.done())
    return path("vocab.pkl")


def legacy_nested_keys(name, depth):
    """A legacy file whose storage-key list is a list nested depth deep."""
    keys = forge.Pickle()
    keys.op(b"(" * depth + b"l" * depth)
    data = one_tensor([4], [1], 4)
    forge.legacy_checkpoint(path(name), data, {"0": (4, bytes(16))},
                            keys=[])
    with open(path(name), "rb") as f:
        blob = f.read()
    # swap the key list ([] pickled) for the nested one
    empty = b"\x80\x02]q\x00."
    i = blob.rindex(empty)
    with open(path(name), "wb") as f:
        f.write(blob[:i] + keys.done() + struct.pack("<q", 4) + bytes(16))
    return path(name)


class TestConvertRefuses(unittest.TestCase):
    def test_cases(self):
        for name, (make, named, phrase) in CASES.items():
            with self.subTest(name):
                args = make()
                out = path("out.bin")
                if os.path.exists(out):
                    os.unlink(out)
                status, stdout, lines, rss = run(CONVERT, *args, "-o", out)
                named = args[args.index(named) + 1] if named in (
                    "--tokenizer",) else \
                    named or args[args.index("--weights") + 1]
                self.assertEqual(status, 3, lines)
                self.assertEqual(stdout, "")
                self.assertEqual(len(lines), 1, lines)
                self.assertTrue(lines[0].startswith("convert.py: "), lines)
                self.assertIn(named, lines[0])
                if phrase:
                    self.assertRegex(lines[0], phrase)
                self.assertLess(rss, MAX_RSS, f"{rss} KiB")
                self.assertFalse(os.path.exists(out))

    def test_usage_errors(self):
        """A usage error is one line too (exit status 2)."""
        for args in ([], ["--weights", "w.pt", "--tokenizer", "t",
                          "--dataset", "wt103", "-o", "x"]):
            status, _, lines, _ = run(CONVERT, *args)
            self.assertEqual(status, 2, lines)
            self.assertEqual(len(lines), 1, lines)
            self.assertRegex(lines[0], r"^convert\.py: .*\(see --help\)$")

    def test_catch_all(self):
        """An exception no case foresees (here: the checkpoint reader
        failing with ZeroDivisionError) is still one line, exit 1."""
        from txlgen import checkpoint, convert
        err = io.StringIO()
        with mock.patch.object(checkpoint, "read_checkpoint",
                               side_effect=ZeroDivisionError("boom")), \
                contextlib.redirect_stderr(err):
            status = convert.main(["--weights", path("x.pt"), "--config",
                                   write_json("cfg.json", CONFIG),
                                   "--tokenizer", TOKENIZER, "-o",
                                   path("out.bin")])
        self.assertEqual(status, 1)
        lines = err.getvalue().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^convert\.py: .*x\.pt.*"
                         r"ZeroDivisionError: boom")


class TestTxlfileRefuses(unittest.TestCase):
    """txlfile.py IN OUT on broken model files: one line naming IN."""

    def model_file(self, name, header, data=b"", header_len=None):
        p = path(name)
        forge.safetensors(p, header, data, header_len)
        return p

    def test_cases(self):
        meta = {"format": "txlgen-model", "format_version": "1"}
        tok = {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}
        cases = {
            "missing": (path("nonexistent.bin"), "No such file"),
            "empty": (self.model_file("empty.bin", b""), None),
            "header length past the end": (self.model_file(
                "long.bin", b"{}", header_len=1 << 40), "header"),
            "header a list": (self.model_file("list.bin", [1]),
                              "not a JSON object"),
            "header nested 100,000 deep": (self.model_file(
                "deep.bin", ("[" * 100_000 + "]" * 100_000).encode()),
                "nested"),
            "shape [3] over 4 bytes": (self.model_file("short.bin", {
                "__metadata__": meta, "tokenizer.model": tok,
                "w": {"dtype": "F32", "shape": [3],
                      "data_offsets": [4, 8]}}, bytes(8)), "need 12"),
            "unknown dtype": (self.model_file("dt.bin", {
                "__metadata__": meta, "tokenizer.model": tok,
                "w": {"dtype": "F99", "shape": [1],
                      "data_offsets": [4, 8]}}, bytes(8)), "dtype"),
            "a dtype that is an object": (self.model_file("dtobj.bin", {
                "__metadata__": meta, "tokenizer.model": tok,
                "w": {"dtype": {}, "shape": [1],
                      "data_offsets": [4, 8]}}, bytes(8)), "dtype"),
            "no tokenizer": (self.model_file("notok.bin", {
                "__metadata__": meta}), "tokenizer"),
        }
        for name, (src, phrase) in cases.items():
            with self.subTest(name):
                out = path("out.bin")
                if os.path.exists(out):
                    os.unlink(out)
                status, stdout, lines, rss = run(TXLFILE, "--dtype", "F16",
                                                 src, out)
                self.assertEqual(status, 3, lines)
                self.assertEqual(len(lines), 1, lines)
                self.assertTrue(lines[0].startswith("txlfile.py: " + src),
                                lines)
                if phrase:
                    self.assertRegex(lines[0], phrase)
                self.assertLess(rss, MAX_RSS)
                self.assertFalse(os.path.exists(out))

    def test_bad_set(self):
        status, _, lines, _ = run(TXLFILE, "--dtype", "F16", "--set", "x",
                                  path("a.bin"), path("b.bin"))
        self.assertEqual(status, 2)
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^txlfile\.py: --set x: expected "
                         "KEY=VALUE")


# The vocabulary of an adaptive-span checkpoint read from its corpus
# (convert.py --vocab-corpus), in a child whose peak memory is measured.
CORPUS_SYMBOLS = """
import os, sys
sys.path.insert(0, os.path.join(sys.argv[3], "models"))
from txlgen import vocab
try:
    syms = vocab.corpus_symbols(sys.argv[1], int(sys.argv[2]))
except vocab.VocabError as e:
    print(e, file=sys.stderr)
    sys.exit(1)
print(len(syms))
"""


class TestVocabCorpus(unittest.TestCase):
    def symbols(self, corpus, most):
        script = write_json("corpus_symbols.py", CORPUS_SYMBOLS)
        return run(script, corpus, str(most), ROOT)

    def test_more_symbols_than_the_checkpoint_stop_at_once(self):
        # 9 MB of distinct words: counted whole (a 169 MB corpus took
        # 2 GB before it was refused)
        corpus = path("many-words.txt")
        with open(corpus, "w") as f:
            for i in range(0, 1_000_000, 1000):
                f.write(" ".join(f"w{j}" for j in range(i, i + 1000)) +
                        "\n")
        rc, out, err, rss = self.symbols(corpus, 6000)
        self.assertEqual((rc, out), (1, ""))
        self.assertEqual(len(err), 1, err)
        self.assertIn(f"{corpus}: more than 6000 symbols", err[0])
        self.assertLess(rss, MAX_RSS)
        # a corpus of as many symbols as the checkpoint: read
        rc, out, err, _ = self.symbols(corpus, 1_000_001)
        self.assertEqual((rc, out.strip(), err), (0, "1000001", []))

    def test_a_run_without_whitespace_is_refused(self):
        # 64 MB with no whitespace: no symbol of a corpus, and joined
        # chunk by chunk it took time quadratic in its length
        corpus = path("one-word.txt")
        with open(corpus, "w") as f:
            for _ in range(64):
                f.write("x" * (1 << 20))
        rc, out, err, rss = self.symbols(corpus, 6000)
        self.assertEqual((rc, out), (1, ""))
        self.assertEqual(len(err), 1, err)
        self.assertIn("characters without whitespace", err[0])
        self.assertLess(rss, MAX_RSS)


if __name__ == "__main__":
    unittest.main()
