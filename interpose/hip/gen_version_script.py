#!/usr/bin/env python3
"""Writes the version script of librgpu-hip.so from hip_api.def: one node per HIP version
(hip_4.2 .. hip_5.2, each inheriting the one before, as libamdhip64.so.5 defines them), each
exporting the entry points the real library defines there; everything else is local.
usage: gen_version_script.py hip_api.def OUTPUT"""
import re
import sys


def main():
    nodes = {}
    for line in open(sys.argv[1]):
        m = re.match(r"HIP_ENTRY\((\d+)_(\d+),\s*(\w+),\s*(\w+)\)", line)
        if m:
            nodes.setdefault((int(m.group(1)), int(m.group(2))), []).append(m.group(3))
    if not nodes:
        sys.exit("gen_version_script.py: no HIP_ENTRY lines in " + sys.argv[1])
    out = []
    previous = None
    for key in sorted(nodes):
        name = "hip_%d.%d" % key
        body = "".join("    %s;\n" % n for n in sorted(nodes[key]))
        local = "  local:\n    *;\n" if previous is None else ""
        out.append("%s {\n  global:\n%s%s}%s;\n" % (name, body, local,
                                                    " " + previous if previous else ""))
        previous = name
    text = "".join(out)
    try:
        if open(sys.argv[2]).read() == text:
            return
    except OSError:
        pass
    with open(sys.argv[2], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
