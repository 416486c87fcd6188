#!/usr/bin/env python3
"""hack/bench-report.py - the benchmark records (JSON lines from hack/bench/*.sh, see
hack/bench/lib.sh) as Markdown tables, written between the markers
<!-- bench:begin --> and <!-- bench:end --> of the target file (made if missing), so the prose
around them is kept.

    hack/bench-report.py RECORDS TARGET --title TITLE --machine M --commit C --date D --mode M
"""
import argparse
import collections
import json
import os
import re
import sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def num(v):
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return ("%.3g" % v) if abs(v) < 100 else ("%.0f" % v)
    return str(v)


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def ratio(r):
    v, ref = r.get("value"), r.get("ref")
    if not isinstance(v, float) or not isinstance(ref, float) or ref == 0:
        return ""
    x = v / ref
    return ("%.2f×" % x) if x < 10 else ("%.0f×" % x)


def render(records, args):
    out = []
    out.append(BEGIN)
    out.append("")
    out.append("Measured %s by `make %s` at commit `%s` on %s." % (
        args.date, args.mode, args.commit, args.machine))
    out.append("References were measured in the same run, on the same machine. Figures are "
               "printed, never asserted. %s" % args.note)
    out.append("")
    goals = [r for r in records if r.get("goal")]
    if goals:
        out.append("### Goals")
        out.append("")
        out.append("| goal | figure | reached | met |")
        out.append("|---|---|---|---|")
        for r in goals:
            out.append("| %s: %s | %s | %s %s | %s |" % (
                cell(r.get("section", "")), cell(r["goal"]), cell(r.get("name", "")),
                num(r.get("value", "")), cell(r.get("unit", "")), cell(r.get("met", "-"))))
        out.append("")
    sections = collections.OrderedDict()
    for r in records:
        sections.setdefault(r.get("section", "Other"), []).append(r)
    for title, rs in sections.items():
        out.append("### %s" % title)
        out.append("")
        out.append("| figure | value | reference (same run) | ratio | how |")
        out.append("|---|---|---|---|---|")
        for r in rs:
            unit = r.get("unit", "")
            ref = ""
            if "ref" in r:
                ref = "%s %s (%s)" % (num(r["ref"]), unit, r.get("ref_name", ""))
            how = r.get("how", "")
            if "n" in r and "n=" not in how:
                how += " (n=%s)" % num(r["n"])
            goal = " — goal %s: %s" % (r["goal"], "met" if r.get("met") == "yes" else "not met") \
                if r.get("goal") else ""
            out.append("| %s | **%s %s**%s | %s | %s | %s |" % (
                cell(r.get("name", "")), num(r.get("value", "")), cell(unit), cell(goal),
                cell(ref), ratio(r), cell(how)))
        out.append("")
    out.append(END)
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("records")
    p.add_argument("target")
    p.add_argument("--title", default="Benchmarks")
    p.add_argument("--machine", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--date", required=True)
    p.add_argument("--mode", default="bench")
    p.add_argument("--note", default="")
    args = p.parse_args()
    records = []
    with open(args.records, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit("%s:%d: not a record: %s" % (args.records, i, e))
    block = render(records, args)
    text = ""
    if os.path.exists(args.target):
        with open(args.target, encoding="utf-8") as f:
            text = f.read()
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, count=1,
                      flags=re.S)
    else:
        text = "# %s\n\n%s\n%s" % (args.title, block, ("\n" + text) if text else "")
    tmp = args.target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.target)


if __name__ == "__main__":
    main()
