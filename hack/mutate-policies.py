#!/usr/bin/env python3
"""hack/mutate-policies.py - mutants of the admission policies' CEL (make mutate, hack/mutate.sh).

The policies are YAML (manifests/policies-*.yaml), so universalmutator's C rules do not apply:
this makes its own mutants of every `expression:` (validations, matchConditions, variables; not
messageExpression, which only words the refusal), one change each:

  ==/!=       the comparison flipped
  &&/||       the connective swapped
  not         a negation dropped (`!x` -> `x`)
  clause      a line of a multi-line expression that ends in && or || dropped (one clause gone)
  verb        an operation or verb literal changed ('CREATE' <-> 'UPDATE', 'use' -> 'get', ...)

Each mutant is judged by the suite that checks that file, on a fresh control plane, in a copy of
the tree whose manifests/ holds the mutant (the other top-level entries are links to the
worktree): test/integration/test_access.sh, test_vmaccess.sh for policies-kubevirt.yaml. A
failing suite kills it. The mutants are taken in a seeded random order, MAX of them.

usage: mutate-policies.py --out DIR --max N --seed S [--timeout T]
Writes DIR/report.md and DIR/results.tsv, and prints them.
"""
import argparse
import glob
import os
import random
import re
import shutil
import subprocess
import time

KILLER = {"manifests/policies-kubevirt.yaml": "test/integration/test_vmaccess.sh"}
DEFAULT_KILLER = "test/integration/test_access.sh"
VERBS = [("'CREATE'", "'UPDATE'"), ("'UPDATE'", "'CREATE'"), ("'DELETE'", "'UPDATE'"),
         ("'use'", "'get'"), ("'create'", "'update'")]


def expression_lines(lines):
    """Indexes of the lines that hold CEL of an `expression:` key (not messageExpression)."""
    out = []
    i = 0
    key = re.compile(r"^(\s*)(- )?expression:\s*(.*)$")
    while i < len(lines):
        m = key.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1)) + (2 if m.group(2) else 0)
        value = m.group(3).strip()
        if value and value[0] not in "|>":
            out.append(i)
            i += 1
            continue
        i += 1
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > indent):
            if lines[i].strip():
                out.append(i)
            i += 1
    return out


def line_mutants(line):
    """(kind, new line) for each one-change mutant of a line of CEL."""
    out = []
    for old, new, kind in (("==", "!=", "==/!="), ("!=", "==", "==/!="), ("&&", "||", "&&/||"),
                           ("||", "&&", "&&/||")):
        for m in re.finditer(re.escape(old), line):
            out.append((kind, line[:m.start()] + new + line[m.end():]))
    for m in re.finditer(r"!(?!=)", line):
        if line[:m.start()].count("'") % 2 == 0:  # not inside a string literal
            out.append(("not", line[:m.start()] + line[m.end():]))
    for old, new in VERBS:
        for m in re.finditer(re.escape(old), line):
            out.append(("verb", line[:m.start()] + new + line[m.end():]))
    return out


def mutants(path):
    with open(path) as f:
        lines = f.read().splitlines(True)
    expr = expression_lines(lines)
    out = []
    for i in expr:
        for kind, new in line_mutants(lines[i]):
            out.append((path, i + 1, kind, lines[i].strip(), new.strip(),
                        "".join(lines[:i] + [new] + lines[i + 1:])))
        s = lines[i].rstrip()
        if (s.endswith("&&") or s.endswith("||")) and (i + 1) in expr:
            out.append((path, i + 1, "clause", lines[i].strip(), "(line dropped)",
                        "".join(lines[:i] + lines[i + 1:])))
    return out


def tree(out, path, text):
    """A copy of the worktree with `text` as `path`: manifests/ copied, the rest linked."""
    t = os.path.join(out, "tree")
    shutil.rmtree(t, ignore_errors=True)
    os.makedirs(t)
    for name in os.listdir("."):
        if name in (".git",):
            continue
        if name == "manifests":
            shutil.copytree(name, os.path.join(t, name), symlinks=True)
        else:
            os.symlink(os.path.abspath(name), os.path.join(t, name))
    with open(os.path.join(t, path), "w") as f:
        f.write(text)
    return t


def judge(out, m, timeout):
    path, text = m[0], m[5]
    t = tree(out, path, text)
    suite = os.path.join(t, KILLER.get(path, DEFAULT_KILLER))
    log = os.path.join(out, "last.log")
    with open(log, "w") as f:
        try:
            r = subprocess.run(["nice", "-n", "10", "bash", suite], stdout=f, stderr=f,
                               timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            r = "timeout"
    return "survived" if r == 0 else "killed"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--max", type=int, default=12)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    files = sorted(glob.glob("manifests/policies-*.yaml"))
    every = [m for f in files for m in mutants(f)]
    random.Random(a.seed).shuffle(every)
    drawn = every[:a.max]
    print("== policies: %d mutants of the CEL in %s; judging %d (seed %d)" % (
        len(every), " ".join(files), len(drawn), a.seed), flush=True)
    results = []
    for i, m in enumerate(drawn):
        t0 = time.time()
        status = judge(a.out, m, a.timeout)
        results.append((m[0], m[1], m[2], status, m[3], m[4]))
        print("  [%d/%d] %s:%d %s %s  (%s -> %s) %.0fs" % (
            i + 1, len(drawn), m[0], m[1], m[2], status, m[3], m[4], time.time() - t0),
            flush=True)
    shutil.rmtree(os.path.join(a.out, "tree"), ignore_errors=True)
    killed = sum(1 for r in results if r[3] == "killed")
    lines = ["| file | mutants | judged | killed | survived | score |", "|---|---|---|---|---|---|"]
    for f in files:
        mine = [r for r in results if r[0] == f]
        k = sum(1 for r in mine if r[3] == "killed")
        lines.append("| `%s` | %d | %d | %d | %d | %s |" % (
            f, sum(1 for m in every if m[0] == f), len(mine), k, len(mine) - k,
            "%.0f%%" % (100.0 * k / len(mine)) if mine else "-"))
    lines.append("| all | %d | %d | %d | %d | %s |" % (
        len(every), len(results), killed, len(results) - killed,
        "%.0f%%" % (100.0 * killed / len(results)) if results else "-"))
    lines += ["", "Survivors:", ""]
    lines += ["- `%s:%d` (%s) `%s` -> `%s`" % (r[0], r[1], r[2], r[4], r[5])
              for r in results if r[3] == "survived"] or ["- none"]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "results.tsv"), "w") as f:
        for r in results:
            f.write("\t".join(str(x) for x in r) + "\n")
    print()
    print(text)


if __name__ == "__main__":
    main()
