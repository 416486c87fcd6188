#!/usr/bin/env python3
"""hack/bench-report.py - the benchmark records (JSON lines from hack/bench/*.sh, see
hack/bench/lib.sh) as Markdown tables in the target file (made if missing), one block per
section between the markers <!-- bench:SECTION:begin --> and <!-- bench:SECTION:end -->, so
the prose around them is kept and a run of some sections leaves the others' figures (and the
date, commit and settings they were measured with) as they were. Each block carries its
records in an HTML comment, from which the table of goals (<!-- bench:goals:begin/end -->) is
made anew over every section.

    hack/bench-report.py TARGET --order "s1 s2 ..." --machine M --commit C --date D --mode M \
        SECTION=RECORDS.jsonl[:NOTE] ...
"""
import argparse
import json
import os
import re
import sys


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


def marker(name, end):
    return "<!-- bench:%s:%s -->" % (name, "end" if end else "begin")


def block_re(name):
    return re.compile(re.escape(marker(name, False)) + ".*?" + re.escape(marker(name, True)),
                      re.S)


def render_section(name, records, meta):
    out = [marker(name, False), ""]
    titles = []
    for r in records:
        t = r.get("section", name)
        if t not in titles:
            titles.append(t)
    for title in titles or [name]:
        out.append("### %s" % title)
        out.append("")
        out.append("| figure | value | reference (same run) | ratio | how |")
        out.append("|---|---|---|---|---|")
        for r in records:
            if r.get("section", name) != title:
                continue
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
    out.append("Measured %s by `%s` at commit `%s` on %s. %s" % (
        meta["date"], meta["mode"], meta["commit"], meta["machine"], meta.get("note", "")))
    out.append("")
    saved = {"meta": meta, "records": records}
    out.append("<!-- records: %s -->" % json.dumps(saved, sort_keys=True).replace("--", "\\u002d-"))
    out.append(marker(name, True))
    return "\n".join(out)


def saved_records(block):
    m = re.search(r"<!-- records: (.*) -->", block)
    if not m:
        return None
    return json.loads(m.group(1))


def render_goals(text, order):
    out = [marker("goals", False), ""]
    out.append("| goal | figure | reached | met | measured |")
    out.append("|---|---|---|---|---|")
    for name in order:
        m = block_re(name).search(text)
        saved = saved_records(m.group(0)) if m else None
        if not saved:
            continue
        for r in saved["records"]:
            if not r.get("goal"):
                continue
            out.append("| %s: %s | %s | %s %s | %s | %s |" % (
                cell(r.get("section", name)), cell(r["goal"]), cell(r.get("name", "")),
                num(r.get("value", "")), cell(r.get("unit", "")), cell(r.get("met", "-")),
                cell(saved["meta"].get("date", ""))))
    out.append("")
    out.append(marker("goals", True))
    return "\n".join(out)


def put_block(text, name, block, order):
    """Replaces the block `name`, or inserts it before the first later section's block (by
    `order`), else at the end."""
    rx = block_re(name)
    if rx.search(text):
        return rx.sub(lambda _: block, text, count=1)
    later = order[order.index(name) + 1:] if name in order else []
    for other in later:
        m = block_re(other).search(text)
        if m:
            return text[:m.start()] + block + "\n\n" + text[m.start():]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("sections", nargs="*", help="SECTION=RECORDS.jsonl[:NOTE]")
    p.add_argument("--title", default="Benchmarks")
    p.add_argument("--order", default="")
    p.add_argument("--machine", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--date", required=True)
    p.add_argument("--mode", default="make bench")
    args = p.parse_args()
    order = args.order.split()
    text = ""
    if os.path.exists(args.target):
        with open(args.target, encoding="utf-8") as f:
            text = f.read()
    if not text:
        text = "# %s\n\n%s\n%s\n" % (args.title, marker("goals", False), marker("goals", True))
    for spec in args.sections:
        name, _, rest = spec.partition("=")
        path, _, note = rest.partition(":")
        records = []
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit("%s:%d: not a record: %s" % (path, i, e))
        meta = {"date": args.date, "mode": args.mode, "commit": args.commit,
                "machine": args.machine, "note": note}
        text = put_block(text, name, render_section(name, records, meta), order)
    goals = render_goals(text, order)
    if block_re("goals").search(text):
        text = block_re("goals").sub(lambda _: goals, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + goals + "\n"
    tmp = args.target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.target)


if __name__ == "__main__":
    main()
