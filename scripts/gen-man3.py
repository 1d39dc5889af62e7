#!/usr/bin/env python3
"""The C API's section-3 pages, generated from the headers, which stay the
manual (engram.h for the client library, engram/server.h for the embedded
server's): one page per function (man/man3/engram_*.3), one per public
type (man/man3/engram_*.3type), engram_errors(3), the status codes, and
engram-tutorial(7) from man/engram-tutorial.7.in with its programs.

  gen-man3.py          writes the pages (and removes pages of things that are gone)
  gen-man3.py --check  exits 1 if a page is missing, stale or extra

What the pages are made of, so that the header is the one source:
  - a function's doc comment, right above its ENGRAM_API declaration. Its
    first sentence is the NAME line; a clause "Errors: ..." running to the
    end of its sentence is the ERRORS list (items split at commas outside
    parentheses: "CODE", "CODE (when)", "CODE / CODE (when)", or "those of
    FUNCTION [and FUNCTION] [but CODE]"); "Since X.Y." is HISTORY; a last
    clause "Notes: ..." is NOTES, the caveats one would learn by crashing;
    lines " *  - NAME: text" (continued by lines indented four spaces) are
    the parameters, a tagged list in DESCRIPTION. Every function that
    returns int must have an Errors clause, and every parameter an item
    that says what it may be (check_parameters).
  - a type's doc comment and its fields' comments; the defaults are what
    the type's *_init function sets, read by compiling and running a probe
    (so a page can never state a default the code does not set).
  - the status codes' #define comments ("what it means. What to do.").
  - complete programs in examples/c/ whose first comment starts "Example
    of:" and names functions: each is the EXAMPLES section of those pages
    (tests/c_examples.sh compiles and runs every one).
The ERRORS lists also go to tests/capi/listed_errors.inc, which the C API's
tests use to fail any call that returns a code its page does not list; the
parameter items' NULL rules go to tests/capi/null_args.inc, whose test calls
every function with NULL for each pointer in turn.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "capi/include/engram/engram.h")
SERVER_HEADER = os.path.join(ROOT, "embedded/include/engram/server.h")
# Each header with what a program includes and links to use it.
HEADERS = [(HEADER, "engram/engram.h", "\\fI\\-lengram\\fP (pkg\\-config engram)", "The engram client library"),
           (SERVER_HEADER, "engram/server.h",
            "\\fI\\-lengram\\-server \\-lengram\\fP (pkg\\-config engram\\-server)", "The engram embedded server library")]
OUT = os.path.join(ROOT, "man/man3")
EXAMPLES = os.path.join(ROOT, "examples/c")
LISTED = os.path.join(ROOT, "tests/capi/listed_errors.inc")
NULL_ARGS = os.path.join(ROOT, "tests/capi/null_args.inc")
DATE = "2026-11-28"
CODE = r"ENGRAM_E_[A-Z_]+"

# Functions any thread may call at any time; the rest follow the handle rule.
ANY_THREAD = re.compile(r"_init$|^engram_rate_limiter_|^engram_strerror$|^engram_last_error$|^engram_version|"
                        r"^engram_client_interrupt$|^engram_server_")
HANDLE_RULE = ("An engram_client and every handle made from it (tables, writers, batches) may be used by one "
               "thread at a time; use one client per thread for parallel work. A listing (engram_items) is the "
               "caller's alone.")


def version():
    text = open(HEADER).read()
    parts = [re.search(r"#define ENGRAM_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def prose(comment):
    body = re.sub(r"^/\*+|\*/$", "", comment)
    return " ".join(line.strip().lstrip("*").strip() for line in body.splitlines()).strip()


# --- reading the headers -----------------------------------------------------------------


def split_top(text, sep):
    """Splits at `sep` where no parenthesis is open."""
    parts, depth, cur, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(sep, i):
            parts.append(cur)
            cur, i = "", i + len(sep)
            continue
        cur += c
        i += 1
    return parts + [cur]


def sentence_end(text):
    """Index of the period that ends the first sentence of text, outside parentheses."""
    depth = 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0 and c == "." and (i + 1 == len(text) or text[i + 1] == " "):
            return i
    return len(text)


def errors_clause(name, body):
    """(body without the clause, [(code, when)] or None, [shared from], [excepted])."""
    m = re.search(r"\bErrors:\s", body)
    if not m:
        return body, None, [], []
    rest = body[m.end():]
    end = sentence_end(rest)
    codes, shared, but = [], [], []
    in_those = False
    for item in split_top(rest[:end], ","):
        item = re.sub(r"^\s*(and|or)\s+", "", item.strip())
        if not item:
            continue
        in_those = in_those and not re.search(CODE, item.partition(" but ")[0])
        if item.startswith("those of") or in_those:
            in_those = True
            head, _, excepted = item.partition(" but ")
            shared += re.findall(r"engram_\w+", head)
            but += re.findall(CODE, excepted)
            continue
        pm = re.match(r"^((?:%s\s*(?:/|or)\s*)*%s)\s*(?:\((.*)\))?$" % (CODE, CODE), item, re.S)
        if not pm:
            sys.exit(f"gen-man3: {name}: cannot read the Errors item {item!r}")
        for code in re.findall(CODE, pm.group(1)):
            codes.append((code, pm.group(2)))
    return (body[:m.start()] + rest[end + 1:]).strip(), codes, shared, but


def functions():
    """Every ENGRAM_API function: a dict of name, proto, body, errors..."""
    out = []
    for path, include, link, lib in HEADERS:
        text = open(path).read()
        found = []
        for m in re.finditer(r"(/\*(?:(?!\*/).)*\*/)\s*\nENGRAM_API ([^;]*?\b(engram_\w+)\s*\([^;]*?\));", text, re.S):
            proto, name = " ".join(m.group(2).split()), m.group(3)
            comment, params = parameter_items(m.group(1))
            body = prose(comment)
            since = re.search(r"\s*Since (\d+\.\d+)\.", body)
            if since:
                body = (body[:since.start()] + body[since.end():]).strip()
            notes = re.search(r"\bNotes:\s", body)  # the comment's last clause: NOTES
            notes, body = (body[notes.end():].strip(), body[:notes.start()].strip()) if notes else (None, body)
            body, errors, shared, but = errors_clause(name, body)
            returns_int = proto.startswith("int ")
            if returns_int and errors is None:
                sys.exit(f"gen-man3: {name} returns int but its comment has no Errors: clause")
            found.append(dict(name=name, proto=proto, body=body, params=params, errors=errors, shared=shared, but=but, notes=notes,
                              since=since.group(1) if since else None, include=include, link=link, lib=lib,
                              returns_int=returns_int, void=proto.startswith("void ")))
        declared = set(re.findall(r"ENGRAM_API [^;(]*?\b(engram_\w+)\s*\(", text))
        missing = declared - {f["name"] for f in found}
        if missing:
            sys.exit(f"gen-man3: functions of {include} without a doc comment right above them: " +
                     ", ".join(sorted(missing)))
        out += found
    resolve_errors(out)
    problems = [p for f in out for p in check_parameters(f)]
    if problems:
        sys.exit("gen-man3: parameters the comments do not describe as the pages need:\n  " + "\n  ".join(problems))
    return out


def parameter_items(comment):
    """(the comment without its parameter list, [(name, text)]). A parameter
    item is a line " *  - NAME: text", continued on lines indented by four
    spaces (" *    more text"); the list runs to the first other line."""
    kept, items, in_list = [], [], False
    for line in comment.split("\n"):
        start = re.match(r"^\s*\*  - (\w+): (.*)$", line)
        more = re.match(r"^\s*\*    (\S.*)$", line)
        if start:
            items.append([start.group(1), start.group(2)])
            in_list = True
        elif in_list and more:
            items[-1][1] += " " + more.group(1)
        else:
            in_list = False
            kept.append(line)
    if items and not kept[-1].rstrip().endswith("*/"):
        kept.append("*/")
    return "\n".join(kept), [(n, re.sub(r"\s*\*/$", "", t).strip()) for n, t in items]


def proto_params(proto):
    """[(type, name)] of a prototype's parameters."""
    inside = proto.split("(", 1)[1].rsplit(")", 1)[0]
    if inside.strip() == "void":
        return []
    out = []
    for p in inside.split(","):
        m = re.match(r"^(.*?)\b(\w+)$", p.strip())
        out.append((" ".join(m.group(1).replace("*", " * ").split()).replace(" *", "*"), m.group(2)))
    return out


def null_rule(text):
    """"must" when a parameter item says Not NULL, "may" when it says may be NULL."""
    if re.search(r"\bNot NULL\b", text, re.I):
        return "must"
    if re.search(r"\bmay be NULL\b", text, re.I):
        return "may"
    return None


HANDLE_RELEASE = {"engram_client": "engram_disconnect", "engram_table": "engram_table_close",
                  "engram_writer": "engram_writer_close", "engram_batch": "engram_batch_release",
                  "engram_items": "engram_items_close", "engram_server": "engram_server_stop"}


def check_parameters(f):
    """What the page of f would leave a caller to guess, as messages. Every
    parameter has one item, in the prototype's order; a pointer's says
    whether it may be NULL; a timeout's, its unit and what -1 means; a
    handle handed out, until when it lives; a number, its range or values.
    A function that can time out or be interrupted says what it waits for."""
    name, params = f["name"], proto_params(f["proto"])
    got = [n for n, _ in f["params"]]
    if got != [n for _, n in params]:
        return [f"{name}: the parameter items are {got or 'missing'}; the prototype's are {[n for _, n in params]}"]
    out = []
    for (ty, p), (_, text) in zip(params, f["params"]):
        if "*" in ty and null_rule(text) is None:
            out.append(f"{name}: {p} is a pointer: say 'Not NULL' or 'May be NULL'")
        if p.endswith("_ms") and not ("millisecond" in text and "-1" in text):
            out.append(f"{name}: {p} is a timeout: give its unit (milliseconds) and what -1 means")
        handle = ty.replace("const ", "").rstrip("*")
        if ty.endswith("**") and handle in HANDLE_RELEASE and not ("until" in text and HANDLE_RELEASE[handle] in text):
            out.append(f"{name}: {p} hands out a handle: say until when it lives ({HANDLE_RELEASE[handle]})")
        if "*" not in ty and not re.search(r"\d|ENGRAM_", text):
            out.append(f"{name}: {p} is a {ty}: give its range or its values")
    codes = {c for c, _ in f["all_errors"]}
    text = f["body"] + " " + " ".join(t for _, t in f["params"])
    if codes & {"ENGRAM_E_TIMEOUT", "ENGRAM_E_INTERRUPTED"} and not re.search(r"\bwait", text, re.I):
        out.append(f"{name}: it can time out or be interrupted: say what it waits for, and how long")
    return out


def resolve_errors(fns):
    """Expands "those of" lists into each function's own."""
    by = {f["name"]: f for f in fns}

    def get(name, seen):
        f = by.get(name)
        if f is None or name in seen:
            sys.exit(f"gen-man3: an Errors clause refers to {name}: " + ("a cycle" if f else "no such function"))
        if "all_errors" not in f:
            out = list(f["errors"] or [])
            for other in f["shared"]:
                for code, why in get(other, seen | {name}):
                    if code not in f["but"] and all(code != c for c, _ in out):
                        out.append((code, why))
            f["all_errors"] = out
        return f["all_errors"]

    for f in fns:
        get(f["name"], set())


def codes():
    """[(code, value, meaning, what to do)] from the #define comments ("meaning. What to do")."""
    text = open(HEADER).read()
    out = []
    for c, v, t in re.findall(r"#define (%s) \((-\d+)\)\s*/\*(.*?)\*/" % CODE, text, re.S):
        t = " ".join(t.split())
        end = sentence_end(t)
        out.append((c, int(v), t[:end], t[end + 1:].strip()))
    return out


def types():
    """Every struct with fields and every enum: name, kind, doc, fields [(decl, name, comment)], text."""
    out = []
    for path, include, link, lib in HEADERS:
        text = open(path).read()
        for m in re.finditer(r"(?:(/\*(?:(?!\*/).)*\*/)\s*\n)?typedef (struct|enum) (engram_\w+) \{(.*?)\} \3;", text, re.S):
            doc, kind, name, body = m.group(1), m.group(2), m.group(3), m.group(4)
            if doc is None or re.match(r"/\* ---", doc):
                sys.exit(f"gen-man3: type {name} has no doc comment right above it")
            fields = []
            if kind == "struct":
                # One declaration per `;`, its comment the /* */ that follows it (to the next declaration).
                for fm in re.finditer(r"\s*([^;/]*?)\b(\w+)((?:\[[^\]]*\])?)\s*;((?:\s*/\*(?:(?!\*/).)*\*/)*)", body, re.S):
                    decl = " ".join((fm.group(1) + fm.group(2) + fm.group(3)).split())
                    if fm.group(4).strip() and re.match(r"[ \t]*\n", fm.group(4)):
                        sys.exit(f"gen-man3: {name}: the comment after {fm.group(2)} starts on a line of its own; a "
                                 "field's comment starts on the field's line (one above it would describe the field before)")
                    comment = " ".join(prose(c) for c in re.findall(r"/\*(?:(?!\*/).)*\*/", fm.group(4), re.S))
                    fields.append((decl, fm.group(2), comment))
            else:
                for em in re.finditer(r"(ENGRAM_\w+)(?:\s*=\s*(\d+))?\s*,?\s*((?:/\*(?:(?!\*/).)*\*/\s*)?)", body, re.S):
                    fields.append((em.group(1), em.group(1), prose(em.group(3)) if em.group(3) else ""))
            out.append(dict(name=name, kind=kind, doc=prose(doc), fields=fields, text=m.group(0)[m.group(0).find("typedef"):],
                            include=include, link=link))
    return out


def check_fields(tys):
    """A type page leaves nothing to guess either: every field but
    struct_size has a comment, and a number's gives its range or values."""
    out = []
    for t in tys:
        for decl, field, comment in t["fields"] if t["kind"] == "struct" else []:
            if field == "struct_size":
                continue
            if not comment:
                out.append(f"{t['name']}.{field} has no comment")
            elif "*" not in decl and not re.search(r"\d|ENGRAM_|engram_|NULL|nonzero|finite", comment):
                out.append(f"{t['name']}.{field}: give its range or its values")
    if out:
        sys.exit("gen-man3: fields the comments do not describe as the pages need:\n  " + "\n  ".join(out))


def defaults(tys):
    """type name -> {field: default as C prints it} for each struct with an *_init
    function, by compiling and running a probe against the headers."""
    inits = [t for t in tys if t["kind"] == "struct" and f"{t['name']}_init" in open(HEADER).read() + open(SERVER_HEADER).read()]
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        sys.exit("gen-man3: no C compiler to read the *_init defaults with")
    lines = ["#include <stdio.h>", "#include <engram/engram.h>", "#include <engram/server.h>",
             "int engram_private_probe(void);", "int main(void) {"]
    for t in inits:
        n = t["name"]
        lines.append(f"{{ {n} v; {n}_init(&v);")
        for decl, field, _ in t["fields"]:
            if field == "struct_size" or "[" in decl:
                continue
            if "engram_rate_limiter " in decl + " ":
                for sub in ("samples_per_insert", "min_size_to_sample", "min_diff", "max_diff"):
                    fmt = "%lld" if sub == "min_size_to_sample" else "%g"
                    cast = "(long long)" if sub == "min_size_to_sample" else "(double)"
                    lines.append(f'printf("{n}.{field}.{sub} {fmt}\\n", {cast}v.{field}.{sub});')
            elif "*" in decl or decl.startswith("engram_progress_fn"):
                lines.append(f'printf("{n}.{field} %s\\n", v.{field} ? "set" : "NULL");')
            elif "double" in decl:
                lines.append(f'printf("{n}.{field} %g\\n", (double)v.{field});')
            else:
                lines.append(f'printf("{n}.{field} %lld\\n", (long long)v.{field});')
        lines.append("}")
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "probe.c"), os.path.join(d, "probe")
        open(src, "w").write("\n".join(lines))
        lib = os.environ.get("ENGRAM_BUILD_DIR", os.path.join(ROOT, "build/release"))
        # The *_init functions live in the libraries; a probe that cannot
        # link states the headers' layout only, so they must be built.
        r = subprocess.run([cc, "-std=c99", "-I", os.path.join(ROOT, "capi/include"), "-I", os.path.join(ROOT, "embedded/include"),
                            src, "-o", exe, f"-L{lib}/capi", f"-L{lib}/embedded", "-lengram-server", "-lengram",
                            f"-Wl,-rpath,{lib}/capi:{lib}/embedded"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gen-man3: the defaults probe does not build (set ENGRAM_BUILD_DIR to a build of the libraries):\n{r.stderr}")
        run = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    out = {}
    for line in run.splitlines():
        key, val = line.rsplit(" ", 1)
        t, field = key.split(".", 1)
        out.setdefault(t, {})[field] = val
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


# --- writing roff -------------------------------------------------------------------------


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


def code_block(text):
    return [".EX"] + ["\\&" + esc(l) if l[:1] in ".'" else esc(l) for l in text.rstrip("\n").split("\n")] + [".EE"]


def see_also(refs):
    """.BR lines for (name, section) pairs."""
    refs = list(dict.fromkeys(refs))
    return [f".BR {esc(n)} ({s})" + ("," if i < len(refs) - 1 else "") for i, (n, s) in enumerate(refs)]


def first_sentence(body):
    """Up to the first period, colon or semicolon outside parentheses: the NAME line."""
    depth = 0
    for i, c in enumerate(body):
        depth += (c == "(") - (c == ")")
        if depth == 0 and c in ".:;" and (i + 1 == len(body) or body[i + 1] == " "):
            return body[:i]
    return body


def sentence(text):
    """text as a sentence: a capital first letter unless it starts with an
    identifier (batch_size, o->flags), and a final period."""
    first = text.split(" ", 1)[0]
    if re.fullmatch(r"[a-z]+", first):
        text = text[0].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def family(name):
    """Functions that belong together by name: engram_writer_*, engram_items_*, ..."""
    for prefix in ("engram_writer_", "engram_items_", "engram_batch_", "engram_sample", "engram_table_",
                   "engram_rate_limiter_", "engram_server_", "engram_update_priorities", "engram_version",
                   "engram_connect", "engram_client_"):
        if name.startswith(prefix):
            return prefix
    return None


def function_page(f, ver, fns, tys, meanings, shown):
    names = {g["name"] for g in fns}
    type_names = {t["name"] for t in tys}
    mentioned = [n for n in re.findall(r"engram_\w+", f["body"] + " " + f["proto"]) if n != f["name"]]
    fam = family(f["name"])
    refs = [(n, "3") for n in mentioned if n in names]
    refs += [(n, "3type") for n in mentioned if n in type_names]
    refs += [(g["name"], "3") for g in fns if fam and g["name"] != f["name"] and g["name"].startswith(fam)]
    refs += [(m, s) for m, s in re.findall(r"\b(engram(?:-[a-z]+)?|engramd|engramctl)\((\d)\)", f["body"])]
    refs += [("engram_errors", "3"), ("engram", "7")]
    if f["returns_int"]:
        returns = ("ENGRAM_OK (0) on success. On failure a negative ENGRAM_E_* code from ERRORS below; "
                   "engram_last_error(3) then says, on this thread, what was wrong and how to fix it.")
    elif f["void"]:
        returns = "None."
    else:
        returns = first_sentence(f["body"]) + "."
    lines = [
        f'.\\" Generated by scripts/gen-man3.py from {f["include"]}; do not edit.',
        f'.TH {f["name"].upper()} 3 {DATE} "engram {ver}" "engram Manual"',
        ".SH NAME", fill(f"{f['name']} \\- {esc(first_sentence(f['body']))}"),
        ".SH LIBRARY", fill(f"{f['lib']}: link with {f['link']}"),
        ".SH SYNOPSIS", ".nf", f".B #include <{f['include']}>", ".PP", synopsis(f["proto"]), ".fi",
        ".SH DESCRIPTION", fill(esc(f["body"]))]
    for p, text in f["params"]:
        lines += [".TP", f".I {esc(p)}", fill(esc(sentence(text)))]
    lines += [".SH RETURN VALUE", fill(esc(returns))]
    if f["returns_int"]:
        lines.append(".SH ERRORS")
        for code, why in f["all_errors"]:
            lines += [".TP", f".B {esc(code)}", fill(esc(sentence(why or meanings[code])))]
    lines += [".SH ATTRIBUTES", ".TS", "allbox;", "lbx lb lb", "l l l.", "Interface\tAttribute\tValue",
              f"T{{\n{esc(f['name'])}\nT}}\tThread safety\t" +
              ("MT\\-Safe" if ANY_THREAD.search(f["name"]) else "MT\\-Safe per handle"), ".TE"]
    if not ANY_THREAD.search(f["name"]):
        lines += [".PP", fill(esc(HANDLE_RULE))]
    if f["notes"]:
        lines += [".SH NOTES", fill(esc(sentence(f["notes"])))]
    if f["since"]:
        lines += [".SH HISTORY", f"engram {f['since']}."]
    for file, text in shown:
        lines += [".SH EXAMPLES" if (file, text) == shown[0] else ".PP",
                  fill(f"The program examples/c/{esc(file)} of engram's sources, whole:"), ".PP"] + code_block(text)
    lines += [".SH SEE ALSO"] + see_also(refs) + [""]
    return "\n".join(lines)


def type_page(t, ver, fns, defaults_of):
    users = [f["name"] for f in fns if re.search(r"\b%s\b" % t["name"], f["proto"])]
    d = defaults_of.get(t["name"], {})
    init = f"{t['name']}_init"
    lines = [
        f'.\\" Generated by scripts/gen-man3.py from {t["include"]}; do not edit.',
        f'.TH {t["name"].upper()} 3type {DATE} "engram {ver}" "engram Manual"',
        ".SH NAME", fill(f"{t['name']} \\- {esc(first_sentence(t['doc']))}"),
        ".SH LIBRARY", fill(f"link with {t['link']}"),
        ".SH SYNOPSIS", ".nf", f".B #include <{t['include']}>", ".fi", ".PP"] + code_block(t["text"]) + [
        ".SH DESCRIPTION", fill(esc(t["doc"]))]
    if d:
        lines += [".PP", fill(esc(f"Call {init}(3) first: it sets every field to the default given below "
                                  "and struct_size to sizeof the struct, so that a caller built against this "
                                  "header keeps working when later versions append fields."))]
    lines.append(".SS " + ("Fields" if t["kind"] == "struct" else "Values"))
    for decl, field, comment in t["fields"]:
        text = comment or ("sizeof the struct, as the *_init function sets it" if field == "struct_size" else "")
        if text:
            text = sentence(text)
        extra = []
        if field in d:
            extra.append(f"{init} sets {d[field]}.")
        subs = {k.split(".", 1)[1]: v for k, v in d.items() if k.startswith(field + ".")}
        if subs:
            extra.append(f"{init} sets " + ", ".join(f"{k} {v}" for k, v in subs.items()) + ".")
        lines += [".TP", f".B {esc(decl)}", fill(esc(" ".join(filter(None, [text] + extra))) or "\\&")]
    if users:
        lines += [".SH USED BY", fill(esc(", ".join(f"{u}(3)" for u in users)) + ".")]
    refs = [(u, "3") for u in users] + ([(init, "3")] if d and init not in users else []) + [("engram", "7")]
    lines += [".SH SEE ALSO"] + see_also(refs) + [""]
    return "\n".join(lines)


def errors_page(ver, fns, all_codes):
    lines = [
        '.\\" Generated by scripts/gen-man3.py from engram/engram.h; do not edit.',
        f'.TH ENGRAM_ERRORS 3 {DATE} "engram {ver}" "engram Manual"',
        ".SH NAME", "engram_errors \\- the status codes of engram's C API and what to do about each",
        ".SH SYNOPSIS", ".nf", ".B #include <engram/engram.h>", ".fi",
        ".SH DESCRIPTION",
        fill(esc("Every function that can fail returns int: ENGRAM_OK (0), or one of the negative codes below, "
                 "whose values never change meaning. engram_strerror(3) names a code; engram_last_error(3) is "
                 "this thread's message for the last failure, with the detail (which table, which column, what "
                 "is allowed). Each function's page lists the codes it returns, and when.")),
        ".SS Codes"]
    for code, value, text, todo in all_codes:
        users = [f["name"] for f in fns if any(c == code for c, _ in f.get("all_errors", []))]
        lines += [".TP", f".BR {esc(code)} \" ({value})\"", fill(esc(sentence(text) + " " + sentence(todo)))]
        if users:
            lines += [".IP", fill(esc("Returned by " + ", ".join(users) + "."))]
    lines += [".SH SEE ALSO"] + see_also([("engram_strerror", "3"), ("engram_last_error", "3"), ("engram", "7")]) + [""]
    return "\n".join(lines)


def listed_table(fns):
    """The ERRORS lists for tests/capi/listed_errors.hpp: a table, and a macro
    per function that checks each call's result against it."""
    lines = ["// Generated by scripts/gen-man3.py from the headers' Errors clauses; do not edit.",
             "// ENGRAM_LISTED(function, codes its man page lists...), then a macro per function",
             "// that checks what a call returns against that list (listed_errors.hpp).",
             "#ifdef ENGRAM_LISTED"]
    for f in fns:
        if f["returns_int"]:
            lines.append(f"ENGRAM_LISTED({f['name']}{''.join(', ' + c for c, _ in f['all_errors'])})")
    lines += ["#else"]
    for f in fns:
        if f["returns_int"]:
            lines.append(f'#define {f["name"]}(...) ::engram::test::listed("{f["name"]}", ::{f["name"]}(__VA_ARGS__))')
    lines += ["#endif"]
    return "\n".join(lines) + "\n"


def null_table(fns):
    """tests/capi/null_args.inc: for every pointer parameter, a call with
    NULL there and a valid value everywhere else (A<type>::get, from
    test_capi_null_args.cpp), and what its item promises: ENGRAM_E_INVALID
    (Not NULL) or anything else, without a crash (May be NULL)."""
    lines = ["// Generated by scripts/gen-man3.py from the headers' parameter items; do not edit.",
             "// ENGRAM_NULL_ARG(function, parameter, must (Not NULL) or may (May be NULL), call)"]
    for f in fns:
        params = proto_params(f["proto"])
        for i, ((ty, p), (_, text)) in enumerate(zip(params, f["params"])):
            if "*" not in ty:
                continue
            args = ", ".join("nullptr" if j == i else f"A<{t}>::get(f)" for j, (t, _) in enumerate(params))
            call = f"{f['name']}({args})"
            if not f["returns_int"]:
                call = f"((void){call}, ENGRAM_OK)"
            lines.append(f'ENGRAM_NULL_ARG({f["name"]}, "{p}", {null_rule(text)}, {call})')
    return "\n".join(lines) + "\n"


TUTORIAL_IN = os.path.join(ROOT, "man/engram-tutorial.7.in")
TUTORIAL = os.path.join(ROOT, "man/man7/engram-tutorial.7")


def tutorial(ver):
    """engram-tutorial(7) from its source, each included example whole."""
    out = []
    for line in open(TUTORIAL_IN).read().replace("@DATE@", DATE).replace("@VERSION@", ver).split("\n"):
        m = re.match(r'^\.\\" include (examples/c/[\w.]+)$', line)
        if m:
            out += code_block(open(os.path.join(ROOT, m.group(1))).read())[1:-1]
        else:
            out.append(line)
    return '.\\" Generated by scripts/gen-man3.py from man/engram-tutorial.7.in; do not edit.\n' + "\n".join(out)


def main():
    check = "--check" in sys.argv[1:]
    ver = version()
    fns = functions()
    tys = types()
    check_fields(tys)
    meanings = {c: t for c, _, t, _ in codes()}
    unknown_codes = {c for f in fns for c, _ in f["all_errors"]} - set(meanings)
    if unknown_codes:
        sys.exit("gen-man3: Errors clauses name codes that do not exist: " + ", ".join(sorted(unknown_codes)))
    shown = examples()
    unknown = sorted(set(shown) - {f["name"] for f in fns})
    if unknown:
        sys.exit("gen-man3: examples name functions that do not exist: " + ", ".join(unknown))
    defaults_of = defaults(tys)
    want = {f"{f['name']}.3": function_page(f, ver, fns, tys, meanings, shown.get(f["name"], [])) for f in fns}
    want.update({f"{t['name']}.3type": type_page(t, ver, fns, defaults_of) for t in tys})
    want["engram_errors.3"] = errors_page(ver, fns, codes())
    have = {f for f in os.listdir(OUT) if re.search(r"\.3(type)?$", f)} if os.path.isdir(OUT) else set()
    bad = sorted(f for f in want if f not in have or open(os.path.join(OUT, f)).read() != want[f])
    extra = sorted(have - set(want))
    table = listed_table(fns)
    others = {LISTED: table, NULL_ARGS: null_table(fns), TUTORIAL: tutorial(ver)}
    stale = [os.path.relpath(p, ROOT) for p, text in others.items() if not os.path.exists(p) or open(p).read() != text]
    if check:
        if bad or extra or stale:
            print("gen-man3: out of date: " + ", ".join(bad + extra + stale) + "; run scripts/gen-man3.py", file=sys.stderr)
            return 1
        print(f"gen-man3: {len(want)} pages up to date")
        return 0
    os.makedirs(OUT, exist_ok=True)
    for f, text in want.items():
        with open(os.path.join(OUT, f), "w") as fh:
            fh.write(text)
    for f in extra:
        os.remove(os.path.join(OUT, f))
    for path, text in others.items():
        with open(path, "w") as fh:
            fh.write(text)
    print(f"gen-man3: wrote {len(want)} pages to man/man3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
