#!/usr/bin/env python3
"""Checks the Python and Rust bindings' declarations against the public
headers, read by gen-man3.py's parser (the one that writes the man pages):
every function a binding declares exists in the header with the same
number of parameters, each of the same type, and the same result type.
Types are compared as the ABI sees them: integers by size and sign,
pointers level by level down to what they point at (a struct by its name,
an opaque handle, char, void), and in Rust whether each pointee is const.
Python's handles are c_void_p, so there a pointer to a handle is a void*.
The structs' layouts are checked elsewhere, against the C compiler
(test_structs_match_the_c_compiler, engram-sys/tests/layout.rs). Julia's
ccalls are checked by bindings/julia/check/run.sh (Julia cannot run
here; its checker reads the Julia grammar), against the functions this
parser reads, which --dump writes for it.

Usage: check-bindings.py [--header ENGRAM_H --server-header SERVER_H]
       check-bindings.py --dump FILE [--header ... --server-header ...]
         (the headers' functions as JSON: name -> {ret, args} as C types)
Needs ENGRAM_LIBRARY (the Python binding loads libengram to be read),
but not with --dump.
Exit 1 with one line per difference."""
import argparse
import ctypes
import importlib.util
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTS = {"int": "i4", "unsigned": "u4", "int32_t": "i4", "uint32_t": "u4", "int64_t": "i8", "uint64_t": "u8",
        "size_t": "u8", "uint8_t": "u1", "int8_t": "i1", "int16_t": "i2", "uint16_t": "u2", "double": "f8",
        "float": "f4"}


class Ptr:
    def __init__(self, to, const):
        self.to, self.const = to, const  # const: what it points at is const


def render(t, consts=True):
    if isinstance(t, Ptr):
        return ("*const " if t.const and consts else "*mut " if consts else "*") + render(t.to, consts)
    return t


def c_type(decl, opaque, enums, fns):
    """A C parameter or result type ("const void* const*") as layers."""
    toks = re.findall(r"\*|\w+", decl)
    const, base, i = False, None, 0
    while i < len(toks) and toks[i] != "*":
        if toks[i] == "const":
            const = True
        elif toks[i] == "unsigned" and base is None:
            base = "unsigned"
        elif toks[i] != "struct":
            base = toks[i] if base != "unsigned" else "unsigned"
        i += 1
    if base in INTS:
        t = INTS[base]
    elif base in enums:
        t = "i4"
    elif base in fns:
        t = "fn"
    elif base in opaque:
        t = "handle:" + base
    else:
        t = base  # void, char, a struct's name
    while i < len(toks):
        assert toks[i] == "*", decl
        i += 1
        t, const = Ptr(t, const), False
        if i < len(toks) and toks[i] == "const":
            const = True
            i += 1
    return t


def for_python(t):
    """Python's view: handles are c_void_p, so a handle* is a void*."""
    if isinstance(t, Ptr):
        if isinstance(t.to, str) and t.to.startswith("handle:"):
            return "void*"
        return for_python(t.to) + "*"
    return t


def py_type(t):
    if t is None:
        return "void"
    if t is ctypes.c_void_p:
        return "void*"
    if t is ctypes.c_char_p:
        return "char*"
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return py_type(t._type_) + "*"
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        return "engram_" + re.sub(r"(?<!^)([A-Z])", r"_\1", t.__name__).lower()
    if isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
        return "fn"
    if t in (ctypes.c_double, ctypes.c_float):
        return "f%d" % ctypes.sizeof(t)
    if t is ctypes.c_char:
        return "char"
    return ("i" if t(-1).value < 0 else "u") + str(ctypes.sizeof(t))


RUST = {"c_int": "i4", "c_uint": "u4", "i32": "i4", "u32": "u4", "i64": "i8", "u64": "u8", "usize": "u8",
        "u8": "u1", "i8": "i1", "u16": "u2", "i16": "i2", "f64": "f8", "f32": "f4", "c_char": "char",
        "c_void": "void", "engram_progress_fn": "fn"}


def rust_type(text, opaque):
    text = text.strip()
    if not text:
        return "void"
    m = re.match(r"^\*(const|mut)\s+(.*)$", text)
    if m:
        return Ptr(rust_type(m.group(2), opaque), m.group(1) == "const")
    if text in opaque:
        return "handle:" + text
    return RUST.get(text, text)


def rust_functions(path, opaque):
    text = re.sub(r"//[^\n]*", "", open(path).read())
    out = {}
    for block in re.findall(r'extern "C" \{(.*?)\n\}', text, re.S):
        for name, params, result in re.findall(r"pub fn (engram_\w+)\s*\(([^)]*)\)\s*(?:->\s*([^;]+))?;", block, re.S):
            types = [rust_type(p.split(":", 1)[1], opaque) for p in params.split(",") if p.strip()]
            out[name] = (rust_type(result or "", opaque), types)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--header", default=os.path.join(ROOT, "capi/include/engram/engram.h"))
    ap.add_argument("--server-header", default=os.path.join(ROOT, "embedded/include/engram/server.h"))
    ap.add_argument("--dump", metavar="FILE", help="write the headers' functions as JSON and check nothing")
    args = ap.parse_args()

    spec = importlib.util.spec_from_file_location("gen_man3", os.path.join(ROOT, "scripts/gen-man3.py"))
    man = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(man)
    man.HEADERS = [(args.header,) + man.HEADERS[0][1:], (args.server_header,) + man.HEADERS[1][1:]]
    # The prototypes only: whether the comments describe every parameter
    # is the pages' check (gen-man3.py --check), not this one.
    man.check_parameters = lambda f: []
    text = open(args.header).read() + open(args.server_header).read()
    opaque = set(re.findall(r"typedef struct (engram_\w+) \1;", text))
    enums = set(re.findall(r"typedef enum (engram_\w+)", text))
    fns = set(re.findall(r"typedef \w+ \(\*(engram_\w+)\)", text))
    header, dump = {}, {}
    for f in man.functions():
        result = f["proto"][: f["proto"].index(f["name"])]
        params = [t for t, _ in man.proto_params(f["proto"])]
        header[f["name"]] = (c_type(result, opaque, enums, fns), [c_type(t, opaque, enums, fns) for t in params])
        dump[f["name"]] = {"ret": result.strip(), "args": params}
    if args.dump:
        with open(args.dump, "w") as out:
            json.dump(dump, out, indent=1, sort_keys=True)
        return 0

    sys.path.insert(0, os.path.join(ROOT, "bindings/python"))
    from engram import _ffi
    python = dict(_ffi._SIGNATURES, **_ffi._SERVER_SIGNATURES)
    rust = rust_functions(os.path.join(ROOT, "bindings/rust/engram-sys/src/lib.rs"), opaque)

    problems = []

    # Each binding's types and the header's as one spelling (Python's view
    # of pointers and handles, Rust's with const), then compared as text.
    for binding, declared, spell, spell_header in (
            ("python", python, py_type, for_python),
            ("rust", rust, render, render)):
        for name, (result, params) in sorted(declared.items()):
            if name not in header:
                problems.append(f"{binding}: declares {name}, which the header does not")
                continue
            got = [spell(result)] + [spell(p) for p in params]
            want = [spell_header(header[name][0])] + [spell_header(p) for p in header[name][1]]
            if len(got) != len(want):
                problems.append(f"{binding}: {name} takes {len(got) - 1} arguments, the header {len(want) - 1}")
                continue
            if got[0] != want[0]:
                problems.append(f"{binding}: {name} returns {got[0]}, the header {want[0]}")
            for k in range(1, len(got)):
                if got[k] != want[k]:
                    problems.append(f"{binding}: {name} argument {k} is {got[k]}, the header's {want[k]}")
        missing = sorted(set(header) - set(declared))
        print(f"check-bindings: {binding}: {len(declared)} of the headers' {len(header)} functions checked"
              + (f"; not bound: {', '.join(missing)}" if missing else ""))
    for p in problems:
        print("check-bindings:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
