#!/usr/bin/python3
"""txlgen.conventions against the C side: the attention kinds' numbers
and properties as lib/include/txl.h, libtxl and lib/compute's kind table
give them; the storage types as libtxl names them; the memory starts as
enum txl_mem_init; the LayerNorm epsilon and same_length mask defaults
as the loader and `txlgen --info` apply them to a file that records
none, and as the converters leave them out of the files they write.

Run: TXLGEN=build/cmd/txlgen TXLGEN_TEST_MODEL=build/tests/unit/m.bin \
     /usr/bin/python3 tests/test_conventions.py
"""

import ctypes
import glob
import json
import os
import re
import subprocess
import unittest

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import conventions as cv
from txlgen.hparams import TxlConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(ROOT, "lib")
TXLGEN = os.environ.get("TXLGEN", os.path.join(ROOT, "build", "cmd",
                                               "txlgen"))
LIBTXL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    TXLGEN))), "lib", "libtxl.so.1")
MODEL = os.environ.get("TXLGEN_TEST_MODEL",
                       os.path.join(ROOT, "build", "tests", "unit", "m.bin"))
SANITIZED = os.environ.get("TXLGEN_SANITIZE", "none") != "none"


def read(path):
    with open(path, encoding="utf-8") as f:
        return re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)


def c_enum(text, name):
    """{NAME: value} of `enum name { NAME = value, ... }` in C text."""
    m = re.search(r"enum\s+" + name + r"\s*\{(.*?)\}", text, re.S)
    return {k: int(v) for k, v in
            re.findall(r"\b([A-Z][A-Z0-9_]*)\s*=\s*([0-9]+)", m.group(1))}


def libtxl():
    lib = ctypes.CDLL(LIBTXL)
    lib.txl_attn_type_name.restype = ctypes.c_char_p
    lib.txl_attn_type_name.argtypes = [ctypes.c_int]
    lib.txl_dtype_name.restype = ctypes.c_char_p
    lib.txl_dtype_name.argtypes = [ctypes.c_int]
    lib.txl_dtype_from_name.argtypes = [ctypes.c_char_p]
    lib.txl_dtype_uses.restype = ctypes.c_uint
    lib.txl_dtype_uses.argtypes = [ctypes.c_int]
    return lib


def info(path):
    r = subprocess.run([TXLGEN, "-m", path, "--info", "--json"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"txlgen --info {path}: {r.stderr}")
    return json.loads(r.stdout)


class TestAttentionKinds(unittest.TestCase):
    def test_numbers_as_txl_h(self):
        """enum txl_attn_type: TXL_ATTN_<NAME> = number, the same five."""
        got = c_enum(read(os.path.join(LIB, "include", "txl.h")),
                     "txl_attn_type")
        self.assertEqual(got, {f"TXL_ATTN_{k.name.upper()}": k.number
                               for k in cv.ATTN_KINDS})
        self.assertEqual([k.number for k in cv.ATTN_KINDS],
                         list(range(len(cv.ATTN_KINDS))))

    def test_properties_as_the_kind_table(self):
        """Each kind's struct txl_attn_kind txl_attn_<name> (lib/compute):
        .memory and .relative as the Python kind says (absent: false),
        and the adaptive span's zero memory."""
        text = "".join(read(p) for p in sorted(glob.glob(
            os.path.join(LIB, "compute", "txl-attn-*.c"))))
        for k in cv.ATTN_KINDS:
            m = re.search(r"const struct txl_attn_kind txl_attn_" + k.name +
                          r"\s*=\s*\{(.*?)\};", text, re.S)
            self.assertIsNotNone(m, f"no txl_attn_{k.name} in lib/compute")
            flags = dict(re.findall(r"\.(\w+)\s*=\s*(true|false)",
                                    m.group(1)))
            for field, want in (("memory", k.memory),
                                ("relative", k.relative),
                                ("zero_memory", k.adaptive_span)):
                self.assertEqual(flags.get(field, "false") == "true", want,
                                 f"{k.name}.{field}")

    def test_sets_and_lookup(self):
        """The derived sets hold what their property says, and
        attn_kind() refuses what is no kind."""
        self.assertEqual(cv.NO_MEMORY_KINDS, (cv.ABS_SINUSOID, cv.ABS_LEARNED))
        self.assertEqual(cv.TABLE_KINDS, (cv.REL_LEARNED, cv.ABS_LEARNED))
        self.assertEqual(cv.ORIGINAL_KINDS, (0, 1, 2, 3))
        self.assertEqual(cv.attn_kind(4).name, "adaptive_span")
        for bad in (-1, 5, True, "0", None):
            with self.assertRaises(ValueError):
                cv.attn_kind(bad)

    @unittest.skipIf(SANITIZED or not os.path.exists(LIBTXL),
                     "libtxl not loadable here")
    def test_libtxl_names_every_kind(self):
        """txl_attn_type_name(): a name for each kind, NULL beyond."""
        lib = libtxl()
        for k in cv.ATTN_KINDS:
            self.assertTrue(lib.txl_attn_type_name(k.number), k.name)
        self.assertIsNone(lib.txl_attn_type_name(len(cv.ATTN_KINDS)))
        self.assertIsNone(lib.txl_attn_type_name(-1))

    @unittest.skipUnless(os.path.exists(TXLGEN), "no txlgen")
    def test_models_of_three_kinds(self):
        """txlgen --info of the unit models: the kind of the file, its
        memory start (the adaptive span's zero states) as conventions
        says."""
        unit = os.path.dirname(MODEL)
        for name, number in (("m.bin", cv.REL_PARTIAL),
                             ("m-attn2.bin", cv.ABS_SINUSOID),
                             ("m-span.bin", cv.ADAPTIVE_SPAN)):
            path = os.path.join(unit, name)
            if not os.path.exists(path):
                continue
            got = info(path)
            self.assertEqual(got["attention"]["attn_type"], number, name)
            want = "zeros" if cv.attn_kind(number).adaptive_span \
                else cv.DEFAULT_MEM_INIT
            self.assertEqual(got["session"]["mem_init"], want, name)


class TestStorageTypes(unittest.TestCase):
    def test_the_list_of_txl_dtype_h(self):
        """Read from TXL_DTYPES: numbers 0, 1, 2... in order, F32 first,
        the bytes type among them."""
        types = cv.storage_types()
        self.assertEqual([v for _, v in types], list(range(len(types))))
        self.assertEqual(types[0], ("F32", 0))
        self.assertIn(cv.BYTES_TYPE, cv.dtype_names())
        self.assertNotIn(cv.BYTES_TYPE, cv.number_types())

    @unittest.skipIf(SANITIZED or not os.path.exists(LIBTXL),
                     "libtxl not loadable here")
    def test_as_libtxl_names_them(self):
        """txl_dtype_name(0 ..) until NULL is the list; each name maps
        back to its number; only the bytes type holds no numbers."""
        lib = libtxl()
        names = []
        while lib.txl_dtype_name(len(names)):
            names.append(lib.txl_dtype_name(len(names)).decode())
        self.assertEqual(tuple(names), cv.dtype_names())
        for name, number in cv.storage_types():
            self.assertEqual(lib.txl_dtype_from_name(name.encode()), number)
            self.assertEqual(lib.txl_dtype_uses(number) == 0,
                             name == cv.BYTES_TYPE, name)


class TestCompute(unittest.TestCase):
    def test_mem_inits_as_txl_h(self):
        got = c_enum(read(os.path.join(LIB, "include", "txl.h")),
                     "txl_mem_init")
        self.assertEqual(got, {f"TXL_MEM_{k.upper()}": v
                               for k, v in cv.MEM_INITS.items()})

    def test_layer_norm_eps_default_as_the_loader(self):
        """txl-params.c's epsilon for a file without layer_norm_eps."""
        text = read(os.path.join(LIB, "model", "txl-params.c"))
        m = re.search(r"ln_eps\s*=\s*([0-9.e+-]+)f?;", text)
        self.assertIsNotNone(m, "txl-params.c: no default ln_eps")
        self.assertEqual(float(m.group(1)), cv.DEFAULT_LAYER_NORM_EPS)

    @unittest.skipUnless(os.path.exists(TXLGEN) and os.path.exists(MODEL),
                         "no txlgen or test model")
    def test_defaults_as_txlgen_info(self):
        """A file of PyTorch origin records neither epsilon nor mask:
        txlgen applies the defaults."""
        got = info(MODEL)
        self.assertNotIn("layer_norm_eps", got["metadata"])
        self.assertEqual(got["architecture"]["layer_norm_eps"],
                         cv.DEFAULT_LAYER_NORM_EPS)
        self.assertEqual(got["architecture"]["same_length_mask"],
                         cv.DEFAULT_SAME_LENGTH_MASK)

    def test_files_record_what_is_not_the_default(self):
        """What the converters write (TxlConfig.hparams): each origin's
        epsilon recorded where it differs from the default, never
        where it is the same; the TF mask recorded, PyTorch's not."""
        base = dict(n_token=10, n_layer=1, n_head=1, d_model=4, d_head=4,
                    d_inner=4)
        for origin, eps in cv.LAYER_NORM_EPS.items():
            hp = TxlConfig(**base, layer_norm_eps=eps).hparams()
            self.assertEqual("layer_norm_eps" in hp,
                             eps != cv.DEFAULT_LAYER_NORM_EPS, origin)
        self.assertEqual(cv.LAYER_NORM_EPS["tensorflow"], 1e-12)
        self.assertEqual(cv.LAYER_NORM_EPS["dwdb"], 1e-6)
        for mask in cv.SAME_LENGTH_MASKS:
            hp = TxlConfig(**base, same_length_mask=mask).hparams()
            self.assertEqual(hp.get("same_length_mask"),
                             None if mask == cv.DEFAULT_SAME_LENGTH_MASK
                             else mask)
        self.assertEqual(set(cv.LAYER_NORM_EPS), set(cv.ORIGINS))


if __name__ == "__main__":
    unittest.main()
