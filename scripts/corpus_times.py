#!/usr/bin/env python3
"""Per-sample wall times of corpus runs on the software GPU, as a Markdown table.

usage: corpus_times.py RESULTS_TSV [LABEL] [RESULTS_TSV LABEL ...]

Each RESULTS_TSV is a results.tsv written by ../shared/corpus/run.sh (columns name, class, reason,
remote_s, local_class, local_reason, local_s). Prints one row per sample with, for each run, its
class and the wall time through rgpu (remote: rgpu run against rgpu-server --backend softgpu over
TCP) and in-process (the face of build/lib/softgpu-local), then the totals over the samples that
pass remotely in every run.
"""
import sys


def load(path):
    rows = {}
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            cells = dict(zip(header, line.rstrip("\n").split("\t")))
            rows[cells["name"]] = cells
    return rows


def seconds(cells, key):
    try:
        return float(cells.get(key, ""))
    except ValueError:
        return None


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    args = argv[1:]
    while args:
        path = args.pop(0)
        label = args.pop(0) if args and not args[0].endswith(".tsv") else path
        runs.append((label, load(path)))
    names = sorted(set().union(*(r.keys() for _, r in runs)), key=str.lower)
    head = ["sample"]
    for label, _ in runs:
        head += ["%s class" % label, "%s rgpu (s)" % label, "%s in-process (s)" % label]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    totals = [[0.0, 0.0] for _ in runs]
    for name in names:
        row = [name]
        passing = all(r.get(name, {}).get("class") == "PASS" for _, r in runs)
        for i, (_, r) in enumerate(runs):
            cells = r.get(name, {})
            remote, local = seconds(cells, "remote_s"), seconds(cells, "local_s")
            local_class = cells.get("local_class", "")
            row += [cells.get("class", "-"), "%.2f" % remote if remote is not None else "-",
                    ("%.2f" % local if local is not None else "-") +
                    ("" if local_class in ("", "PASS", cells.get("class")) else " (%s)" % local_class)]
            if passing and remote is not None:
                totals[i][0] += remote
                totals[i][1] += local or 0.0
        print("| " + " | ".join(row) + " |")
    row = ["**total, samples passing in every run**"]
    for remote, local in totals:
        row += ["", "%.1f" % remote, "%.1f" % local]
    print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
