#!/usr/bin/env python3
"""Generates the CUDA driver ABI tables from the installed toolkit's headers.

The toolkit's headers are the one source of truth for the driver ABI.

1. Entry points. The C preprocessor runs over cuda.h (plain, and with
   CUDA_API_PER_THREAD_DEFAULT_STREAM for the _ptds/_ptsz variants); every `CUresult name(params);`
   declaration is an exported symbol. Older ABI revisions that cuda.h no longer declares
   (cuGetProcAddress without its status argument, 32-bit cuMemAlloc, ...) come from their
   cudaTypedefs.h typedefs, which give their exact signatures.
   Output: entry_points.inc, `RGPU_ENTRY(name, (typed parameters), (argument names))` per symbol.

2. cuGetProcAddress revisions. cudaTypedefs.h declares one `PFN_<name>_v<version>[_ptds|_ptsz]`
   typedef per ABI revision. The k-th revision (in version order) of `name` is the symbol `name`
   for k = 0 and `name_v<k+1>` after that (cuMemAlloc@2000 -> cuMemAlloc, @3020 -> cuMemAlloc_v2).
   A per-thread revision maps to the default-stream symbol in force at its version plus its suffix
   (cuMemcpyHtoD_v7000_ptds -> cuMemcpyHtoD_v2_ptds).
   Output: proc_table.inc, `RGPU_PROC("name", version, per_thread, symbol)` sorted by name, version.

4. per_thread_entries.inc beside entry_points.inc: for every `<base>_ptsz` entry (a call on a
   stream, made by a program built for per-thread default streams), a macro
   `RGPU_PER_THREAD_<name>` that expands to `RGPU_PER_THREAD_DEFINE(name, base, (typed
   parameters), (argument names), prologue)`, where the prologue passes each parameter's address
   to `rgpu::client::DefaultToPerThread` (which turns a NULL stream into CU_STREAM_PER_THREAD: in a
   `_ptsz` entry point NULL names the calling thread's default stream, not the legacy one).

Everything that lists driver entry points (the interposer's exports, cuGetProcAddress,
docs/compatibility.md) is generated from these files.

3. entry_undefs.inc beside entry_points.inc: `#undef name` for every entry, so that a file which
   defines or declares all entries by their exported names is not rewritten by cuda.h's
   `#define cuMemAlloc cuMemAlloc_v2` mappings; and the legacy `_v1` types (32-bit device
   pointers, pre-3.2 descriptors) that the exported pre-3.2 symbols (cuMemAlloc, cuMemcpy2D, ...)
   take, which cuda.h defines only for the driver's own build.

The profiler's entry points (cuProfilerStart/Stop/Initialize) are declared in cudaProfiler.h and
cudaProfilerTypedefs.h, and exported by libcuda.so.1 like the rest.

usage: gen_entry_points.py CC CUDA_INCLUDE_DIR ENTRY_POINTS_OUT PROC_TABLE_OUT
"""
import collections
import os
import re
import subprocess
import sys

TYPE_WORDS = {"int", "char", "short", "long", "unsigned", "signed", "float", "double", "void",
              "size_t", "const", "volatile", "struct", "enum"}


def preprocess(cc, include, extra):
    src = "#include <cuda.h>\n#include <cudaProfiler.h>\n"
    out = subprocess.run([cc, "-E", "-P", "-x", "c", "-I", include] + extra + ["-"],
                         input=src, capture_output=True, text=True, check=True).stdout
    return " ".join(out.split())


def split_params(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def name_params(params):
    if params == ["void"] or params == []:
        return [], []
    typed, names = [], []
    for i, p in enumerate(params):
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", p)
        if fp:
            typed.append(p)
            names.append(fp.group(1))
            continue
        m = re.match(r"^(.*?[\s\*])(\w+)\s*$", p)
        if m and m.group(2) not in TYPE_WORDS and m.group(1).strip() and not p.endswith("*"):
            typed.append(p)
            names.append(m.group(2))
        else:
            name = "a%d" % i
            typed.append(p + " " + name)
            names.append(name)
    return typed, names


def revisions(typedefs_text):
    """(name, version, suffix, params) for every PFN typedef."""
    out = []
    for m in re.finditer(r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\s*\)"
                         r"\s*\(([^;]*?)\)\s*;", typedefs_text):
        out.append((m.group(1), int(m.group(2)), m.group(3), " ".join(m.group(4).split())))
    return out


def revision_symbols(revs):
    """Maps each revision to its exported symbol; returns [(name, version, per_thread, symbol, params)]."""
    default = collections.defaultdict(list)
    per_thread = collections.defaultdict(list)
    for name, version, suffix, params in revs:
        (per_thread if suffix else default)[name].append((version, suffix, params))
    rows = []
    for name in sorted(default):
        versions = sorted(default[name])
        symbol_at = []
        for k, (v, _, params) in enumerate(versions):
            symbol = name if k == 0 else "%s_v%d" % (name, k + 1)
            symbol_at.append((v, symbol))
            rows.append((name, v, 0, symbol, params))
        for v, suffix, params in sorted(per_thread.get(name, [])):
            base = [s for d, s in symbol_at if d <= v]
            if base:
                rows.append((name, v, 1, base[-1] + suffix, params))
    return rows


def legacy_types(internal_text, known_words):
    """[(name, typedef)] for the `_v1` types cuda.h defines only for the driver's own build (the
    32-bit device pointer and the pre-3.2 copy and array descriptors), in definition order."""
    out = []
    pattern = (r"typedef\s+struct\s+(\w+_v1_st)\s*\{([^{}]*)\}\s*(\w+_v1)\s*;"
               r"|typedef\s+([\w ]+?)\s+(\w+_v1)\s*;")
    for m in re.finditer(pattern, internal_text):
        name = m.group(3) or m.group(5)
        if name in known_words or any(name == n for n, _ in out):
            continue
        if m.group(3):
            definition = "typedef struct %s {%s} %s;" % (m.group(1), m.group(2).strip(), name)
        else:
            definition = "typedef %s %s;" % (m.group(4), name)
        out.append((name, definition))
    return out


def main():
    cc, include, output, proc_output = sys.argv[1:5]
    entries = {}
    plain_text = None
    for extra in ([], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"]):
        text = preprocess(cc, include, extra)
        plain_text = plain_text or text
        for m in re.finditer(r"\bCUresult\s+(cu\w+)\s*\(([^;]*?)\)\s*;", text):
            name, params = m.group(1), m.group(2)
            if name in entries or "{" in params or "}" in params:
                continue
            typed, names = name_params(split_params(params))
            entries[name] = (typed, names)
    typedefs = (open(include + "/cudaTypedefs.h").read() +
                open(include + "/cudaProfilerTypedefs.h").read())
    rows = revision_symbols(revisions(typedefs))
    known_words = set(re.findall(r"\w+", plain_text))
    legacy = legacy_types(preprocess(cc, include, ["-D__CUDA_API_VERSION_INTERNAL"]), known_words)
    known_words |= {name for name, _ in legacy}
    for name, version, pt, symbol, params in rows:
        if symbol in entries:
            continue
        typed, names = name_params(split_params(params))
        # Only revisions whose parameter types cuda.h defines (plainly, or as legacy types) can
        # be declared; the rest stay out and answer NOT_FOUND.
        type_words = set(re.findall(r"\w+", " ".join(typed))) - set(names)
        if type_words <= known_words:
            entries[symbol] = (typed, names)
    with open(proc_output, "w") as f:
        f.write("// Generated by client/abi/gen_entry_points.py from cudaTypedefs.h. Do not edit.\n")
        for name, v, pt, symbol, _ in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
            if symbol not in entries:
                continue
            f.write('RGPU_PROC("%s", %d, %d, %s)\n' % (name, v, pt, symbol))
    with open(os.path.join(os.path.dirname(output), "entry_undefs.inc"), "w") as f:
        f.write("// Generated by client/abi/gen_entry_points.py. Do not edit.\n")
        f.write("#include <cudaProfiler.h>\n")
        for name in sorted(entries):
            f.write("#undef %s\n" % name)
        f.write("// The pre-3.2 (32-bit device pointer) types of the legacy entry points, as cuda.h\n"
                "// defines them for the driver's own build (__CUDA_API_VERSION_INTERNAL).\n")
        for name, definition in legacy:
            f.write("%s\n" % definition)
    with open(os.path.join(os.path.dirname(output), "per_thread_entries.inc"), "w") as f:
        f.write("// Generated by client/abi/gen_entry_points.py from cuda.h. Do not edit.\n")
        for name in sorted(entries):
            if not name.endswith("_ptsz") or name[:-len("_ptsz")] not in entries:
                continue
            typed, names = entries[name]
            prologue = " ".join("rgpu::client::DefaultToPerThread(&%s);" % n for n in names)
            f.write("#define RGPU_PER_THREAD_%s RGPU_PER_THREAD_DEFINE(%s, %s, (%s), (%s), %s)\n" %
                    (name, name, name[:-len("_ptsz")], ", ".join(typed), ", ".join(names),
                     prologue))
    with open(output, "w") as f:
        f.write("// Generated by client/abi/gen_entry_points.py from cuda.h. Do not edit.\n")
        for name in sorted(entries):
            typed, names = entries[name]
            f.write("RGPU_ENTRY(%s, (%s), (%s))\n" % (name, ", ".join(typed), ", ".join(names)))


if __name__ == "__main__":
    main()
