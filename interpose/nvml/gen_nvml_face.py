#!/usr/bin/env python3
"""Writes what librgpu-nvml.so's face needs beyond nvml_api.def: the stubs of the exported entry
points it does not forward (exports.txt less nvml_api.def's rows and nvmlErrorString, one
NVML_STUB(name) each) and the version script exporting exactly exports.txt.
usage: gen_nvml_face.py nvml_api.def exports.txt STUBS_INC VERSION_SCRIPT"""
import re
import sys


def write_if_changed(path, text):
    try:
        if open(path).read() == text:
            return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


def main():
    api, exports_path, stubs_path, script_path = sys.argv[1:5]
    forwarded = set(re.findall(r"^NVML_FN\((\w+),", open(api).read(), re.M))
    exports = [l.strip() for l in open(exports_path) if l.strip() and not l.startswith("#")]
    if len(set(exports)) != len(exports):
        sys.exit("gen_nvml_face.py: a name appears twice in " + exports_path)
    missing = forwarded - set(exports)
    if missing:
        sys.exit("gen_nvml_face.py: not in exports.txt: " + ", ".join(sorted(missing)))
    stubs = [n for n in exports if n not in forwarded and n != "nvmlErrorString"]
    write_if_changed(stubs_path, "".join("NVML_STUB(%s)\n" % n for n in stubs))
    body = "".join("    %s;\n" % n for n in exports)
    write_if_changed(script_path, "{\n  global:\n%s  local:\n    *;\n};\n" % body)


if __name__ == "__main__":
    main()
