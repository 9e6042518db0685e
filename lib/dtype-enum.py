#!/usr/bin/python3
"""Write enum txl_dtype, the public values of the storage types, from the
one list of them (TXL_DTYPES in lib/kernels/txl-dtype.h): the header that
txl.h includes and meson installs beside it.

Refuses a list whose numbers are not 0, 1, 2... in its order (a number
is the ABI: a type never moves, a new one goes at the end).
Usage: dtype-enum.py TXL-DTYPE.H OUTPUT
"""

import re
import sys

LIST = re.compile(r"#\s*define\s+TXL_DTYPES\(X\)((?:[^\n]*\\\n)*[^\n]*)")
ENTRY = re.compile(r"\bX\(\s*([A-Z0-9_]+)\s*,\s*([0-9]+)\s*\)")


def types(text):
    """[(name, number)] of the list in the text of txl-dtype.h."""
    m = LIST.search(text)
    if not m:
        raise ValueError("no #define TXL_DTYPES(X)")
    got = [(n, int(v)) for n, v in ENTRY.findall(m.group(1))]
    if not got:
        raise ValueError("TXL_DTYPES lists no type")
    for i, (name, value) in enumerate(got):
        if value != i:
            raise ValueError(f"TXL_DTYPES: {name} is {value}, expected {i} "
                             "(numbers never change; a new type goes last)")
    names = [n for n, _ in got]
    if len(set(names)) != len(names):
        raise ValueError("TXL_DTYPES names a type twice")
    return got


def main(src, out):
    with open(src, encoding="utf-8") as f:
        try:
            got = types(f.read())
        except ValueError as e:
            sys.exit(f"{src}: {e}")
    lines = ["/* SPDX-License-Identifier: MIT */",
             "/* txl-dtype-enum.h - enum txl_dtype, for txl.h: written by",
             " * the build from the list of libtxl's storage types. */",
             "#ifndef TXL_DTYPE_ENUM_H",
             "#define TXL_DTYPE_ENUM_H",
             "",
             "enum txl_dtype {"]
    lines += [f"\tTXL_{name} = {value}," for name, value in got]
    lines += [f"\tTXL_N_DTYPES = {len(got)}", "};", "",
              "#endif /* TXL_DTYPE_ENUM_H */", ""]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: dtype-enum.py TXL-DTYPE.H OUTPUT")
    main(sys.argv[1], sys.argv[2])
