#!/usr/bin/env python3
"""One man page per function of the public C API (man/man3/engram_*.3),
generated from the doc comment above each declaration in engram.h (the
client library) and engram/server.h (the embedded server's library).

  gen-man3.py          writes the pages (and removes pages of functions that are gone)
  gen-man3.py --check  exits 1 if a page is missing, stale or extra

A complete program in examples/c/ whose first comment starts "Example of:"
and names functions is shown in the EXAMPLES section of each of their
pages (tests/c_examples.sh compiles and runs every one).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "capi/include/engram/engram.h")
# Each header with what a program includes and links to use it.
HEADERS = [(HEADER, "engram/engram.h", "\\fI\\-lengram\\fP (pkg\\-config engram)"),
           (os.path.join(ROOT, "server/include/engram/server.h"), "engram/server.h",
            "\\fI\\-lengram\\-server \\-lengram\\fP (pkg\\-config engram\\-server)")]
OUT = os.path.join(ROOT, "man/man3")
EXAMPLES = os.path.join(ROOT, "examples/c")

THREADS = ("An engram_client and every handle made from it may be used by one thread at a time; "
           "the *_init functions, the rate limiter presets, engram_strerror, engram_last_error, "
           "engram_version*, the server functions and engram_client_interrupt may be called from any thread.")


def version():
    text = open(HEADER).read()
    parts = [re.search(r"#define ENGRAM_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def functions():
    """(name, prototype, comment, include, link) for every ENGRAM_API declaration."""
    out = []
    for path, include, link in HEADERS:
        text = open(path).read()
        found = []
        for m in re.finditer(r"(/\*(?:(?!\*/).)*\*/)\s*\nENGRAM_API ([^;]*?\b(engram_\w+)\s*\([^;]*?\));", text, re.S):
            comment, proto, name = m.group(1), " ".join(m.group(2).split()), m.group(3)
            body = re.sub(r"^/\*+|\*/$", "", comment)
            body = " ".join(line.strip().lstrip("*").strip() for line in body.splitlines()).strip()
            found.append((name, proto, body, include, link))
        declared = set(re.findall(r"ENGRAM_API [^;(]*?\b(engram_\w+)\s*\(", text))
        missing = declared - {f[0] for f in found}
        if missing:
            sys.exit(f"gen-man3: functions of {include} without a doc comment right above them: " +
                     ", ".join(sorted(missing)))
        out += found
    return out


def examples():
    """function name -> [(file name, program text)] from examples/c."""
    out = {}
    for f in sorted(os.listdir(EXAMPLES)) if os.path.isdir(EXAMPLES) else []:
        if not f.endswith(".c"):
            continue
        text = open(os.path.join(EXAMPLES, f)).read()
        m = re.match(r"/\* Example of: ((?:[^\n]|\n \* (?=engram_))*)\n", text)
        if not m:
            sys.exit(f"gen-man3: examples/c/{f} does not start with /* Example of: FUNCTION, ... */")
        for name in re.findall(r"engram_\w+", m.group(1)):
            out.setdefault(name, []).append((f, text))
    return out


def esc(t):
    return t.replace("\\", "\\e").replace("-", "\\-")


def fill(text, width=78):
    """Prose as input lines of at most `width` bytes (mandoc -T lint wants
    80), none starting with a control character."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return "\n".join("\\&" + l if l[0] in ".'" else l for l in lines)


def synopsis(proto, width=72):
    """The prototype in bold, broken after commas to fit `width`."""
    parts = esc(proto + ";").split(", ")
    lines, line = [], ""
    for i, part in enumerate(parts):
        piece = part + ("," if i < len(parts) - 1 else "")
        if line and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = "    " + piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    return "\n".join(f"\\fB{l}\\fR" for l in lines)


def example_section(shown):
    if not shown:
        return []
    out = [".SH EXAMPLES"]
    for f, text in shown:
        out += [fill(f"The program examples/c/{esc(f)} of engram's sources, whole:"), ".PP", ".EX"]
        out += ["\\&" + esc(l) if l[:1] in ".'" else esc(l) for l in text.rstrip("\n").split("\n")]
        out += [".EE"]
    return out


def page(name, proto, body, include, link, ver, shown=()):
    first = re.split(r"(?<=[.:;])\s", body, 1)[0].rstrip(".:;")
    returns = ("Nothing." if proto.startswith("void ") else
               "The value described above." if not proto.startswith("int ") else
               "ENGRAM_OK (0) on success, otherwise a negative ENGRAM_E_* code (see above); "
               "engram_last_error(3) then says what was wrong and how to fix it, and engram_strerror(3) names the code.")
    return "\n".join([
        f'.\\" Generated by scripts/gen-man3.py from {include}; do not edit.',
        f'.TH {name.upper()} 3 2026-11-22 "engram {ver}" "engram Manual"',
        ".SH NAME", fill(f"{name} \\- {esc(first)}"),
        ".SH SYNOPSIS", ".nf", f".B #include <{include}>", ".PP", synopsis(proto), ".fi",
        ".PP", f"Link with {link}.",
        ".SH DESCRIPTION", fill(esc(body)),
        ".SH RETURN VALUE", fill(esc(returns)),
        ".SH THREAD SAFETY", fill(esc(THREADS)),
        *example_section(shown),
        ".SH SEE ALSO", ".BR engram (7),", ".BR engram_strerror (3),", ".BR engramd (8)", ""])


def main():
    check = "--check" in sys.argv[1:]
    ver = version()
    shown = examples()
    fns = functions()
    unknown = sorted(set(shown) - {f[0] for f in fns})
    if unknown:
        sys.exit("gen-man3: examples name functions that do not exist: " + ", ".join(unknown))
    want = {f"{n}.3": page(n, p, b, inc, link, ver, shown.get(n, ())) for n, p, b, inc, link in fns}
    have = {f for f in os.listdir(OUT) if f.endswith(".3")} if os.path.isdir(OUT) else set()
    bad = sorted(f for f in want if f not in have or open(os.path.join(OUT, f)).read() != want[f])
    extra = sorted(have - set(want))
    if check:
        if bad or extra:
            print("gen-man3: pages out of date: " + ", ".join(bad + extra) + "; run scripts/gen-man3.py", file=sys.stderr)
            return 1
        print(f"gen-man3: {len(want)} pages up to date")
        return 0
    os.makedirs(OUT, exist_ok=True)
    for f, text in want.items():
        with open(os.path.join(OUT, f), "w") as fh:
            fh.write(text)
    for f in extra:
        os.remove(os.path.join(OUT, f))
    print(f"gen-man3: wrote {len(want)} pages to man/man3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
