// Checks Engram.jl without Julia: every .jl file parses with the Julia
// grammar (tree-sitter-julia), every public function of engram.h has a
// ccall whose name, argument count, argument types and return type agree
// with the header (through the table of C -> Julia types below), as the
// one header parser reads it (gen-man3.py's, which writes the man pages
// and checks the Python and Rust bindings: FUNCTIONS_JSON is its
// `scripts/check-bindings.py --dump`), and every
// mirrored struct has the header's fields in order, with the sizes and
// offsets the C compiler gives (LAYOUT, from a probe that run.sh compiles).
//
// With README, its ```julia blocks must parse too, and every function they
// call must be one the package defines (exported, if called unqualified) or
// one of a few Base names, with keyword arguments the package's definitions
// take: the README's snippet is checked like the package, since it cannot
// be run here either.
//
// Usage: node check.js HEADER FUNCTIONS_JSON PACKAGE_DIR LAYOUT_FILE [README]
//   LAYOUT_FILE: lines "struct size N" and "struct.field N" (offsetof).
// Exit 0 when everything agrees; else 1, with one line per disagreement.
'use strict';
const fs = require('fs');
const path = require('path');
const Parser = require('tree-sitter');
const Julia = require('tree-sitter-julia');

const [headerPath, functionsPath, pkgDir, layoutPath, readmePath] = process.argv.slice(2);
if (!layoutPath) {
  console.error('usage: node check.js HEADER FUNCTIONS_JSON PACKAGE_DIR LAYOUT_FILE [README]');
  process.exit(2);
}
const problems = [];
const problem = (msg) => problems.push(msg);

// --- the header ---------------------------------------------------------------

const header = fs.readFileSync(headerPath, 'utf8').replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/.*$/gm, ' ');
const constants = {};
for (const m of header.matchAll(/#define\s+(ENGRAM_\w+)\s+\(?(-?\d+)\)?/g)) constants[m[1]] = Number(m[2]);
const evalSize = (expr) => Function(`return (${expr.replace(/ENGRAM_\w+/g, (n) => constants[n])});`)();

// A C type as written ("const engram_client*") -> {base, stars, constBase}.
function cType(text) {
  const t = text.replace(/\s+/g, ' ').trim();
  const stars = (t.match(/\*/g) || []).length;
  const words = t.replace(/\*/g, ' ').split(' ').filter((w) => w && w !== 'const');
  return { base: words.join(' '), stars, constBase: /^const\b/.test(t) };
}

const functions = {};
for (const [name, f] of Object.entries(JSON.parse(fs.readFileSync(functionsPath, 'utf8'))))
  functions[name] = { ret: cType(f.ret), args: f.args.map(cType) };
const structs = {};
for (const m of header.matchAll(/typedef struct (engram_\w+) \{([\s\S]*?)\} \1;/g)) {
  const fields = [];
  for (const decl of m[2].split(';').map((d) => d.trim()).filter(Boolean)) {
    const first = decl.match(/^([\w\s]*?[\w\*]+[\s\*]+)(\w+(?:\[[^\]]*\])?(?:\s*,\s*\w+(?:\[[^\]]*\])?)*)$/);
    if (!first) { problem(`engram.h: cannot read field "${decl}" of ${m[1]}`); continue; }
    for (const n of first[2].split(',').map((x) => x.trim())) {
      const arr = n.match(/^(\w+)\[([^\]]+)\]$/);
      fields.push({ name: arr ? arr[1] : n, type: cType(first[1]), count: arr ? evalSize(arr[2]) : 0 });
    }
  }
  structs[m[1]] = fields;
}
if (Object.keys(functions).length < 40) problem(`engram.h: read only ${Object.keys(functions).length} functions`);

// --- C -> Julia types ------------------------------------------------------------

const BASE = {
  int: ['Cint', 'Int32'], unsigned: ['Cuint', 'UInt32'], 'unsigned int': ['Cuint', 'UInt32'],
  int32_t: ['Int32', 'Cint'], uint32_t: ['UInt32', 'Cuint'], int64_t: ['Int64'], uint64_t: ['UInt64'],
  size_t: ['Csize_t', 'UInt64'], double: ['Cdouble', 'Float64'], void: ['Cvoid'], char: ['Cchar', 'UInt8'],
};
// Function-pointer typedefs (engram_progress_fn) are C function pointers: Ptr{Cvoid}.
for (const m of header.matchAll(/typedef[^;{}]*\(\s*\*\s*(engram_\w+)\s*\)/g)) BASE[m[1]] = ['Ptr{Cvoid}'];
const baseNames = (b) => BASE[b] || (b.startsWith('engram_') ? [b] : []);
// Every Julia spelling accepted for C type t (as an argument or return when
// `param`, else as a struct field).
function juliaTypes(t, param) {
  if (t.base === 'char' && t.stars === 1) return param ? ['Cstring', 'Ptr{Cchar}', 'Ptr{UInt8}'] : ['Ptr{Cchar}', 'Ptr{UInt8}', 'Cstring'];
  let names = baseNames(t.base);
  for (let s = 0; s < t.stars; s++) {
    const outer = s === t.stars - 1 && param ? ['Ptr', 'Ref'] : ['Ptr'];
    names = outer.flatMap((o) => names.map((n) => `${o}{${n}}`));
  }
  return names;
}
const norm = (s) => s.replace(/\s+/g, '');

// --- the Julia files ------------------------------------------------------------------

const parser = new Parser();
parser.setLanguage(Julia);
const jlFiles = [];
(function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.jl')) jlFiles.push(p);
  }
})(pkgDir);
if (!jlFiles.length) problem(`no .jl files under ${pkgDir}`);

const ccalls = {};      // name -> [{ret, args, where}]
const defined = {};     // function name -> Set of its parameter names (all definitions)
const exported = new Set();
// A parameter's name: `x`, `x::T`, `x = v`, `x::T = v`, `xs...`.
function paramName(n) {
  if (n.type === 'identifier') return n.text;
  if (['typed_expression', 'named_argument', 'splat_expression'].includes(n.type) && n.namedChildren[0]) return paramName(n.namedChildren[0]);
  return null;
}
function noteDefinition(call) {  // a call_expression that is a definition's signature
  const callee = call.namedChildren[0];
  if (!callee) return;
  const name = callee.type === 'field_expression' ? callee.namedChildren[1].text : callee.text;
  const params = defined[name] = defined[name] || new Set();
  const args = call.namedChildren[1];
  for (const a of args ? args.namedChildren : []) { const p = paramName(a); if (p) params.add(p); }
}
const jlStructs = {};   // name -> [{name, type}]
const documented = new Set();  // names with a docstring on one of their definitions
const definedAt = {};          // name -> where first defined (top level)
// The name a top-level definition defines: function f(...), f(...) = ...,
// [mutable] struct S; a docstring is the string literal just before it.
function definitionName(n) {
  let call = null;
  if (n.type === 'function_definition') call = n.namedChildren.find((c) => c.type === 'signature');
  if (call) call = call.namedChildren[0];
  if (n.type === 'assignment' && n.namedChildren[0] && n.namedChildren[0].type === 'call_expression') call = n.namedChildren[0];
  if (call && call.type === 'call_expression' && call.namedChildren[0]) return call.namedChildren[0].text;
  if (n.type === 'struct_definition') {
    const head = n.namedChildren.find((c) => c.type === 'type_head');
    return head ? head.text.trim().split(/[{<\s]/)[0] : null;
  }
  return null;
}
function visit(node, file, fn) {
  fn(node, file);
  for (const c of node.namedChildren) visit(c, file, fn);
}
for (const file of jlFiles) {
  const src = fs.readFileSync(file, 'utf8');
  const tree = parser.parse(src);
  const rel = path.relative(pkgDir, file);
  visit(tree.rootNode, rel, (n) => {
    if (n.type === 'ERROR' || n.isMissing) {
      problem(`${rel}:${n.startPosition.row + 1}: does not parse as Julia (${n.isMissing ? 'missing ' + n.type : 'syntax error'}): ${src.slice(n.startIndex, n.startIndex + 60).split('\n')[0]}`);
    }
    if (n.type === 'export_statement') for (const c of n.namedChildren) exported.add(c.text);
    if (n.parent && (n.parent.type === 'source_file' || n.parent.type === 'module_definition')) {
      const name = definitionName(n);
      if (name) {
        definedAt[name] = definedAt[name] || `${rel}:${n.startPosition.row + 1}`;
        const prev = n.previousNamedSibling;
        if (prev && prev.type === 'string_literal') documented.add(name);
      }
    }
    if (n.type === 'signature' && n.namedChildren[0] && n.namedChildren[0].type === 'call_expression') noteDefinition(n.namedChildren[0]);
    if (n.type === 'assignment' && n.namedChildren[0] && n.namedChildren[0].type === 'call_expression') noteDefinition(n.namedChildren[0]);
    if (n.type === 'struct_definition') {
      const head = n.namedChildren.find((c) => c.type === 'type_head');
      if (head) defined[head.text.trim()] = defined[head.text.trim()] || new Set();
    }
    if (n.type === 'call_expression' && n.namedChildren[0] && n.namedChildren[0].text === 'ccall') {
      const args = n.namedChildren[1] ? n.namedChildren[1].namedChildren : [];
      const where = `${rel}:${n.startPosition.row + 1}`;
      const target = args[0] && args[0].text.match(/^\(\s*:(\w+)\s*,/);
      if (!target || args.length < 3) { problem(`${where}: a ccall that is not ccall((:name, lib), Ret, (Args...,), ...)`); return; }
      const tuple = args[2];
      if (tuple.type !== 'tuple_expression') { problem(`${where}: ccall argument types are not a tuple`); return; }
      (ccalls[target[1]] = ccalls[target[1]] || []).push({
        ret: norm(args[1].text), args: tuple.namedChildren.map((a) => norm(a.text)), nargs: args.length - 3, where,
      });
    }
    if (n.type === 'struct_definition') {
      const head = n.namedChildren.find((c) => c.type === 'type_head');
      const name = head && head.text.trim();
      if (name && name.startsWith('engram_')) {
        jlStructs[name] = n.namedChildren.filter((c) => c.type === 'typed_expression')
          .map((f) => ({ name: f.namedChildren[0].text, type: norm(f.namedChildren[1].text) }));
      }
    }
  });
}

// --- docstrings: every exported name defined here has one (help(name) in the REPL) -----------

for (const name of exported)
  if (definedAt[name] && !documented.has(name)) problem(`${definedAt[name]}: exported ${name} has no docstring`);

// --- functions ------------------------------------------------------------------------------

for (const [name, f] of Object.entries(functions)) {
  const calls = ccalls[name];
  if (!calls) { problem(`${name}: no ccall wraps it`); continue; }
  for (const c of calls) {
    const rets = juliaTypes(f.ret, true);
    if (!rets.includes(c.ret)) problem(`${c.where}: ${name} returns ${c.ret}; engram.h says ${f.ret.base}${'*'.repeat(f.ret.stars)} (${rets.join(' or ')})`);
    if (c.args.length !== f.args.length) {
      problem(`${c.where}: ${name} takes ${f.args.length} arguments in engram.h, ${c.args.length} in the ccall`);
      continue;
    }
    if (c.nargs !== f.args.length) problem(`${c.where}: ${name}: ${c.args.length} argument types but ${c.nargs} arguments passed`);
    f.args.forEach((a, i) => {
      const ok = juliaTypes(a, true);
      if (!ok.includes(c.args[i])) problem(`${c.where}: ${name} argument ${i + 1} is ${c.args[i]}; engram.h says ${a.base}${'*'.repeat(a.stars)} (${ok.join(' or ')})`);
    });
  }
}
for (const name of Object.keys(ccalls)) if (!functions[name]) problem(`${ccalls[name][0].where}: ccall of ${name}, which engram.h does not declare`);

// --- structs and their layout -----------------------------------------------------------------

const SIZE = { Cint: 4, Int32: 4, Cuint: 4, UInt32: 4, Int64: 8, UInt64: 8, Csize_t: 8, Cdouble: 8, Float64: 8,
               Cchar: 1, UInt8: 1, Int8: 1, Bool: 1, Cstring: 8, Int16: 2, UInt16: 2, Float32: 4 };
function juliaLayout(type) {  // {size, align} of a Julia field type
  if (/^(Ptr|Ref)\{/.test(type) || type === 'Cstring') return { size: 8, align: 8 };
  const tup = type.match(/^NTuple\{(\d+),(\w+)\}$/);
  if (tup) { const e = juliaLayout(tup[2]); return { size: Number(tup[1]) * e.size, align: e.align }; }
  if (SIZE[type]) return { size: SIZE[type], align: SIZE[type] };
  if (jlStructs[type]) return structLayout(type);
  throw new Error(`no size known for Julia type ${type}`);
}
function structLayout(name) {
  let off = 0, align = 1;
  const offsets = {};
  for (const f of jlStructs[name]) {
    const l = juliaLayout(f.type);
    off = Math.ceil(off / l.align) * l.align;
    offsets[f.name] = off;
    off += l.size;
    align = Math.max(align, l.align);
  }
  return { size: Math.ceil(off / align) * align, align, offsets };
}
const cLayout = {};
for (const line of fs.readFileSync(layoutPath, 'utf8').split('\n').filter(Boolean)) {
  const i = line.lastIndexOf(' ');
  cLayout[line.slice(0, i)] = Number(line.slice(i + 1));
}
for (const [name, fields] of Object.entries(structs)) {
  const jl = jlStructs[name];
  if (!jl) { problem(`struct ${name}: not mirrored in the package`); continue; }
  const names = jl.map((f) => f.name).join(', ');
  if (names !== fields.map((f) => f.name).join(', ')) {
    problem(`struct ${name}: fields (${names}); engram.h has (${fields.map((f) => f.name).join(', ')})`);
    continue;
  }
  fields.forEach((f, i) => {
    const ok = f.count ? juliaTypes(f.type, false).map((t) => `NTuple{${f.count},${t}}`) : juliaTypes(f.type, false);
    if (!ok.includes(jl[i].type)) problem(`struct ${name}.${f.name} is ${jl[i].type}; engram.h says ${f.type.base}${'*'.repeat(f.type.stars)}${f.count ? `[${f.count}]` : ''} (${ok.join(' or ')})`);
  });
  let layout;
  try { layout = structLayout(name); } catch (e) { problem(`struct ${name}: ${e.message}`); continue; }
  if (layout.size !== cLayout[`${name} size`]) problem(`struct ${name}: ${layout.size} bytes in Julia, ${cLayout[`${name} size`]} in C`);
  for (const f of fields) {
    if (layout.offsets[f.name] !== cLayout[`${name}.${f.name}`]) problem(`struct ${name}.${f.name}: offset ${layout.offsets[f.name]} in Julia, ${cLayout[`${name}.${f.name}`]} in C`);
  }
}

// --- the README's Julia snippets -----------------------------------------------------------

const BASE_CALLS = new Set(['fill', 'zeros', 'close', 'println', 'print', 'length', 'size', 'Float32', 'Float64',
                            'Int32', 'Int64', 'UInt8', 'collect', 'sum', 'vec', 'append!']);
let readmeBlocks = 0;
if (readmePath) {
  const text = fs.readFileSync(readmePath, 'utf8');
  for (const m of text.matchAll(/^```julia\n([\s\S]*?)^```$/gm)) {
    readmeBlocks++;
    const where = `README.md julia block ${readmeBlocks}`;
    const tree = parser.parse(m[1]);
    visit(tree.rootNode, where, (n) => {
      if (n.type === 'ERROR' || n.isMissing) problem(`${where}:${n.startPosition.row + 1}: does not parse as Julia: ${n.text.split('\n')[0].slice(0, 60)}`);
      if (n.type !== 'call_expression' || !n.namedChildren[0]) return;
      const callee = n.namedChildren[0];
      const qualified = callee.type === 'field_expression' && callee.namedChildren[0].text === 'Engram';
      if (callee.type !== 'identifier' && !qualified) return;
      const name = qualified ? callee.namedChildren[1].text : callee.text;
      const line = `${where}:${n.startPosition.row + 1}`;
      if (!defined[name]) {
        if (qualified || !BASE_CALLS.has(name)) problem(`${line}: calls ${qualified ? 'Engram.' : ''}${name}, which Engram.jl does not define`);
        return;
      }
      if (!qualified && !exported.has(name) && !BASE_CALLS.has(name)) problem(`${line}: calls ${name} unqualified, but Engram.jl does not export it`);
      const args = n.namedChildren[1];
      for (const a of args ? args.namedChildren : []) {
        if (a.type !== 'named_argument') continue;
        const k = paramName(a);
        if (k && !defined[name].has(k)) problem(`${line}: ${name} takes no keyword ${k}`);
      }
    });
  }
  if (!readmeBlocks) problem(`${readmePath} has no julia block`);
}

if (problems.length) {
  for (const p of problems) console.log(p);
  console.log(`julia check: ${problems.length} problems`);
  process.exit(1);
}
console.log(`julia check: ${jlFiles.length} files parse; ${Object.keys(functions).length} functions and ` +
            `${Object.keys(structs).length} structs agree with engram.h and the C compiler` +
            (readmePath ? `; the README's ${readmeBlocks} julia block(s) parse and call what the package defines` : ''));
