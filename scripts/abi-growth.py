#!/usr/bin/env python3
"""Reads an abidiff report on stdin; exits 0 when every reported change is an
allowed growth: new fields appended to a struct that begins with struct_size
(the header's convention for option and info structs), and 1 otherwise,
printing the first line that is not such a growth.

    abidiff old.abi new.so | abi-growth.py capi/include/engram/engram.h
"""
import re
import sys

header = open(sys.argv[1]).read()
# Structs whose first member is `size_t struct_size;`.
growable = set(re.findall(r"typedef struct (\w+) \{\s*size_t struct_size;", header))

allowed = [
    r"Functions changes summary: .*", r"Variables changes summary: .*", r"Function symbols changes summary: .*",
    r"Variable symbols changes summary: .*", r"\d+ functions? with some indirect sub-type change:",
    r"\[C\] 'function .*' at .* has some indirect sub-type changes:",
    r"parameter \d+ of type '.*' has sub-type changes:", r"in pointed to type '.*'( at .*)?:",
    r"in unqualified underlying type '.*'( at .*)?:", r"\d+ data member insertions?:",
    r"\d+ Added functions?:", r"\[A\] 'function .*'.*", r"Added function.*",
]
struct = None
old_size = None
for raw in sys.stdin:
    line = raw.strip()
    if not line:
        continue
    m = re.match(r"underlying type 'struct (\w+)'( at .*)? changed:", line)
    if m:
        struct = m.group(1)
        if struct not in growable:
            print(f"abi-growth: struct {struct} changed and does not begin with struct_size: {line}")
            sys.exit(1)
        continue
    m = re.match(r"type size changed from (\d+) to (\d+) \(in bits\)", line)
    if m and struct:
        old_size = int(m.group(1))
        if int(m.group(2)) <= old_size:
            print(f"abi-growth: struct {struct} did not grow: {line}")
            sys.exit(1)
        continue
    m = re.match(r"'.*', at offset (\d+) \(in bits\)( at .*)?", line)
    if m and struct and old_size is not None:
        if int(m.group(1)) < old_size:
            print(f"abi-growth: a field was inserted inside struct {struct}, not appended: {line}")
            sys.exit(1)
        continue
    if any(re.fullmatch(p, line) for p in allowed):
        continue
    print(f"abi-growth: not an allowed growth: {line}")
    sys.exit(1)
sys.exit(0)
