#!/usr/bin/env python3
"""Calls per cycle from two callgrind profiles of `fencelock-bench s1`
(--cycles 1000 and 3000): (calls(3000) - calls(1000)) / 2000, for the
allocator's entry points, and the biggest callers of `malloc`.

    python3 bench/tools/callgrind_calls.py cg.fencelock.1000 cg.fencelock.3000
"""
import collections
import re
import sys

FN = re.compile(r"(c?fn)=\((\d+)\)(?: (.*))?")


def callers(path):
    """{(caller, callee): calls} from a callgrind out file (compressed names)."""
    names, fn, cfn = {}, None, None
    out = collections.Counter()
    with open(path, errors="replace") as f:
        for line in f:
            m = FN.match(line)
            if m:
                kind, i, name = m.groups()
                if name:
                    names[i] = name.strip()
                if kind == "fn":
                    fn = names.get(i)
                else:
                    cfn = names.get(i)
                continue
            if line.startswith("calls=") and cfn is not None:
                out[(fn, cfn)] += int(line[6:].split()[0])
    return out


def main():
    small, big = callers(sys.argv[1]), callers(sys.argv[2])
    cycles = 2000
    for target in ("malloc", "realloc", "calloc"):
        total = sum(v for (_, c), v in big.items() if c == target)
        total -= sum(v for (_, c), v in small.items() if c == target)
        print(f"{target:8} {total / cycles:6.1f} per cycle")
    per = collections.Counter()
    for (caller, callee), v in big.items():
        if callee == "malloc":
            per[caller] += v - small.get((caller, callee), 0)
    print("malloc callers per cycle:")
    for caller, v in per.most_common(15):
        if v / cycles >= 0.5:
            print(f"  {v / cycles:5.1f}  {caller[:110]}")


if __name__ == "__main__":
    main()
