#!/usr/bin/env python3
"""hack/mutate.py - the C mutation campaign of make mutate (hack/mutate.sh runs it).

For each source file: universalmutator (--noCheck) writes every mutant its C rules make; they
are taken in a random order (random.Random(seed, file): the same seed, the same order) and
judged one at a time, niced, with a timeout, until MAX have been killed or survived:

  uncompilable  the mutant does not compile with the project's flags, warnings being errors
                as in every build of the project (not counted)
  equivalent    its object at -O2 is byte-identical to the original's (trivial compiler
                equivalence, TCE: a mutant the compiler cannot tell apart; not counted)
  killed        compiled at -O0 without sanitizers, linked into the plain build's unit runner
                (or kubetool, for the informer: build/plain) in place of the original object,
                the file's killer fails (a test fails, the run crashes, or it times out)
  killed-asan   the plain build's killer passes, but the same killer with the sanitizer build
                of make test (build/asan: ASan, UBSan, LeakSanitizer) fails: a leak, an
                out-of-bounds access or undefined behaviour the plain build does not show
  survived      the killer passes in both builds

Writes OUT/results.tsv (file, mutant, line, status, original line, mutated line) and
OUT/report.md (score per file and overall, survivors), and prints both as it goes.

usage: mutate.py --um MUTATE --flags FLAGS.sh --out DIR --max N --seed S --timeout T
                 FILE[:FIRST-LAST][@MAX[,TIMEOUT]]=KILLER...
FIRST-LAST limits the mutants to those lines; MAX and TIMEOUT, when given, replace --max and
--timeout for that file (a killer that runs an integration suite is slow).
KILLER is "unit:SUITE,SUITE" (the unit runner, once per suite) or "cmd:COMMAND" (a shell
command; KUBETOOL in it becomes the mutant's kubetool, HOSTDEVD the mutant's hostdevd), or
several of them joined by ";" (run in turn until one kills: a file with pure parts in a unit
suite and the rest driven by an integration suite).
"""
import argparse
import difflib
import filecmp
import os
import random
import signal
import shutil
import subprocess
import sys
import time
import zlib


def sh_arrays(flags):
    """The arrays of build/mutate/flags.sh (written by make mutate-flags)."""
    out = {}
    for name in ("CFLAGS", "LIBS", "UNIT_LDFLAGS", "UNIT_OBJS", "KUBETOOL_OBJS", "ASAN_CFLAGS",
                 "ASAN_LDFLAGS", "ASAN_UNIT_OBJS", "ASAN_KUBETOOL_OBJS", "HOSTDEVD_OBJS",
                 "ASAN_HOSTDEVD_OBJS"):
        r = subprocess.run(["bash", "-c", '. "$1"; printf "%%s\\0" "${%s[@]}"' % name, "-", flags],
                           check=True, capture_output=True, text=True)
        out[name] = [w for w in r.stdout.split("\0") if w]
    r = subprocess.run(["bash", "-c", '. "$1"; printf "%s" "$CC"', "-", flags], check=True,
                       capture_output=True, text=True)
    out["CC"] = r.stdout
    return out


# The sanitizers as make test runs them (hack/run-tests.sh).
ASAN_ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def run(cmd, timeout=None, **kw):
    """The command's exit code, or "timeout"; it runs in a session of its own, and on a timeout
    the whole session is stopped (SIGTERM, then SIGKILL after 10 s), an integration suite's
    control plane and kubelet with it."""
    p = subprocess.Popen(["nice", "-n", "10"] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, **kw)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):  # traps clean up first
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return "timeout"


def normalize(orig, mutant):
    """The mutant with the original's line numbers (so that __LINE__ in log calls does not make
    every object differ), and (line, original text, mutated text) of its change. A line inserted
    joins the line before it; a line deleted leaves an empty line."""
    ops = [op for op in difflib.SequenceMatcher(None, orig, mutant, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1:
        return mutant, (ops[0][1] + 1 if ops else 0, "(several lines)", "(several lines)")
    tag, i1, i2, j1, j2 = ops[0]
    if tag == "replace" and i2 - i1 == j2 - j1 == 1:
        return mutant, (i1 + 1, orig[i1].strip(), mutant[j1].strip())
    if tag == "delete" and i2 - i1 == 1:
        return orig[:i1] + ["\n"] + orig[i2:], (i1 + 1, orig[i1].strip(), "(line deleted)")
    if tag == "insert" and j2 - j1 == 1 and i1 > 0 and "//" not in orig[i1 - 1] and \
            not orig[i1 - 1].lstrip().startswith("#"):
        joined = orig[i1 - 1].rstrip("\n") + " " + mutant[j1].strip() + "\n"
        return orig[:i1 - 1] + [joined] + orig[i1:], (
            i1, orig[i1 - 1].strip(), orig[i1 - 1].strip() + " " + mutant[j1].strip())
    return mutant, (i1 + 1, "".join(orig[i1:i2]).strip(), "".join(mutant[j1:j2]).strip())


class Campaign:
    def __init__(self, args):
        self.a = args
        self.f = sh_arrays(args.flags)
        self.work = os.path.join(args.out, "m")  # the mutant sits at work/<path>
        self.results = []
        self.max, self.timeout = args.max, args.timeout

    def compile(self, src_rel, text, obj, opt, asan=False):
        """Compiles `text` as if it were src_rel (same __FILE__, same debug paths); with asan,
        with the sanitizer build's flags."""
        path = os.path.join(self.work, src_rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        flags = [w for w in self.f["ASAN_CFLAGS" if asan else "CFLAGS"]
                 if w not in ("-MMD", "-MP") and not w.startswith("-O")]
        cmd = [self.f["CC"]] + flags + [opt, "-g0", "-iquote",
                                        os.path.dirname(src_rel),
                                        "-ffile-prefix-map=%s/=" % self.work, "-c", "-o", obj,
                                        path]
        return run(cmd, timeout=120) == 0

    def link(self, src_rel, obj, killer, asan=False):
        """The killer's binary with `obj` in place of the original object, or None; with asan,
        the sanitizer build's."""
        pre = "ASAN_" if asan else ""
        orig = ("build/asan/" if asan else "build/plain/") + src_rel[:-2] + ".o"
        unit = killer.startswith("unit:")
        tool = "unit-tests" if unit else "hostdevd" if "HOSTDEVD" in killer else "kubetool"
        objs = self.f[pre + {"unit-tests": "UNIT_OBJS", "hostdevd": "HOSTDEVD_OBJS",
                             "kubetool": "KUBETOOL_OBJS"}[tool]]
        if orig not in objs:
            sys.exit("mutate: %s is not linked into the killer's binary (%s)" % (src_rel, killer))
        binary = os.path.join(self.work, ("asan-" if asan else "") + tool)
        cmd = [self.f["CC"]] + (self.f["ASAN_LDFLAGS"] if asan else []) + \
            (self.f["UNIT_LDFLAGS"] if unit else []) + ["-o", binary]
        cmd += [obj if o == orig else o for o in objs]
        cmd += self.f["LIBS"] + (["-lcunit"] if unit else [])
        return binary if run(cmd, timeout=120) == 0 else None

    def kill(self, killer, binary, asan=False):
        """True when the killer fails with this binary (a timeout is a failure)."""
        env = ASAN_ENV if asan else None
        timeout = self.timeout * (3 if asan else 1)
        if killer.startswith("unit:"):
            for suite in killer[5:].split(","):
                r = run([binary, suite], timeout=timeout, env=env)
                if r != 0:
                    return True
            return False
        cmd = killer[4:].replace("KUBETOOL", binary).replace("HOSTDEVD", binary)
        return run(["bash", "-c", cmd], timeout=timeout, env=env) != 0

    def generate(self, src):
        gen = os.path.join(self.a.out, "gen", src.replace("/", "_"))
        shutil.rmtree(gen, ignore_errors=True)
        os.makedirs(gen)
        r = subprocess.run(["nice", "-n", "10", self.a.um, os.path.abspath(src), "c", "--noCheck",
                            "--mutantDir", os.path.abspath(gen)], cwd=gen, capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit("mutate: universalmutator failed on %s:\n%s" % (src, r.stdout + r.stderr))
        base = os.path.basename(src)[:-2]
        names = [n for n in os.listdir(gen) if n.startswith(base + ".mutant.") and n.endswith(".c")]
        names.sort(key=lambda n: int(n.split(".")[-2]))
        return gen, names

    def judge_file(self, src, killer, span=None):
        gen, names = self.generate(src)
        order = sorted(names, key=lambda n: int(n.split(".")[-2]))
        random.Random(self.a.seed * 1000003 + zlib.crc32(src.encode())).shuffle(order)
        with open(src) as f:
            orig_text = f.read()
        orig_lines = orig_text.splitlines(True)
        ref = os.path.join(self.work, "orig-O2.o")
        if not self.compile(src, orig_text, ref, "-O2"):
            sys.exit("mutate: %s does not compile as it is" % src)
        for asan in (False, True):
            ref_obj = os.path.join(self.work, "orig-asan.o" if asan else "orig.o")
            if not self.compile(src, orig_text, ref_obj, "-O1" if asan else "-O0", asan):
                sys.exit("mutate: %s does not compile%s" % (src, " with ASan" if asan else ""))
            if self.link_and_kill(src, ref_obj, killer, asan) is not False:
                sys.exit("mutate: the killer of %s fails without a mutant%s: %s" % (
                    src, " (sanitizer build)" if asan else "", killer))
        print("== %s%s: %d mutants; judging %d in a seeded random order (seed %d); killer %s" % (
            src, " lines %d-%d" % span if span else "", len(names), self.max, self.a.seed,
            killer), flush=True)
        judged = 0
        for name in order:
            if judged >= self.max:
                break
            with open(os.path.join(gen, name)) as f:
                text = f.read()
            lines, (line, before, after) = normalize(orig_lines, text.splitlines(True))
            if span and not span[0] <= line <= span[1]:
                continue
            text = "".join(lines)
            t0 = time.time()
            status = self.judge(src, text, killer, ref)
            judged += status in ("killed", "killed-asan", "survived")
            self.results.append((src, name, line, status, before, after))
            print("  [%d/%d] %s:%d %s  (%s -> %s) %.1fs" % (
                judged, self.max, src, line, status, before, after, time.time() - t0),
                flush=True)
        with open(os.path.join(self.work, src), "w") as f:
            f.write(orig_text)  # the work copy held the last mutant
        return len(names)

    def judge(self, src, text, killer, ref):
        o2 = os.path.join(self.work, "mutant-O2.o")
        if not self.compile(src, text, o2, "-O2"):
            return "uncompilable"
        if filecmp.cmp(o2, ref, shallow=False):
            return "equivalent"
        obj = os.path.join(self.work, "mutant.o")
        if not self.compile(src, text, obj, "-O0"):
            return "uncompilable"
        killed = self.link_and_kill(src, obj, killer)
        if killed is None:
            return "uncompilable"
        if killed:
            return "killed"
        # Survived the plain build: judged again as make test runs it, with the sanitizers.
        obj = os.path.join(self.work, "mutant-asan.o")
        if self.compile(src, text, obj, "-O1", True) and self.link_and_kill(src, obj, killer, True):
            return "killed-asan"
        return "survived"

    def link_and_kill(self, src, obj, killer, asan=False):
        """True when one of the killers (KILLER;KILLER...: each linked with `obj` and run in
        turn, the first to fail ends it) kills the mutant, False when none does, None when a
        binary does not link."""
        for part in killer.split(";"):
            binary = self.link(src, obj, part, asan)
            if not binary:
                return None
            if self.kill(part, binary, asan):
                return True
        return False


def known_survivors(path):
    """hack/mutate-survivors.tsv: (file, original line, mutated line) -> (kind, why), kind being
    "equivalent" (behaves as the original: not counted), "untestable" (counted, survived) or
    "missing" (a test that should exist and does not yet: counted, survived)."""
    known = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    src, before, after, kind, why = line.rstrip("\n").split("\t")
                    known[(src, before, after)] = (kind, why)
    return known


def report(results, generated, args):
    known = known_survivors(args.survivors)
    results = [r[:3] + ("equivalent" if r[3] == "survived" and
                        known.get((r[0], r[4], r[5]), ("survived",))[0] == "equivalent"
                        else r[3],) + r[4:] for r in results]
    lines = ["| file | mutants | drawn | uncompilable | equivalent (TCE, analysis) | killed "
             "(of them by ASan only) | survived | score |", "|---|---|---|---|---|---|---|---|"]
    kinds = ("killed", "killed-asan", "survived", "equivalent", "uncompilable")
    tot = dict.fromkeys(kinds + ("tce", "n"), 0)
    for src in generated:
        mine = [r for r in results if r[0] == src]
        c = {k: sum(1 for r in mine if r[3] == k) for k in kinds}
        tce = sum(1 for r in mine if r[3] == "equivalent" and (src, r[4], r[5]) not in known)
        killed = c["killed"] + c["killed-asan"]
        judged = killed + c["survived"]
        lines.append("| `%s` | %d | %d | %d | %d, %d | %d (%d) | %d | %s |" % (
            src, generated[src], len(mine), c["uncompilable"], tce, c["equivalent"] - tce,
            killed, c["killed-asan"], c["survived"],
            "%.1f%%" % (100.0 * killed / judged) if judged else "-"))
        for k in c:
            tot[k] += c[k]
        tot["tce"] += tce
        tot["n"] += len(mine)
    killed = tot["killed"] + tot["killed-asan"]
    judged = killed + tot["survived"]
    lines.append("| all | %d | %d | %d | %d, %d | %d (%d) | %d | %s |" % (
        sum(generated.values()), tot["n"], tot["uncompilable"], tot["tce"],
        tot["equivalent"] - tot["tce"], killed, tot["killed-asan"], tot["survived"],
        "%.1f%%" % (100.0 * killed / judged) if judged else "-"))
    lines += ["", "Mutants that lived (equivalent by analysis, or survived), with why:", ""]
    rows = []
    for r in results:
        k = known.get((r[0], r[4], r[5]))
        if r[3] == "survived" or k:
            rows.append("- `%s:%d` `%s` -> `%s`: %s" % (
                r[0], r[2], r[4], r[5], "%s: %s" % k if k else "NOT EXPLAINED"))
    lines += rows or ["- none"]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    print()
    print(text)


def read_results(out):
    """results.tsv and the number of mutants generated per file (in gen/)."""
    results, generated = [], {}
    with open(os.path.join(out, "results.tsv")) as f:
        for line in f:
            src, name, n, status, before, after = line.rstrip("\n").split("\t")
            results.append((src, name, int(n), status, before, after))
            if src not in generated:
                gen = os.path.join(out, "gen", src.replace("/", "_"))
                generated[src] = sum(1 for x in os.listdir(gen) if ".mutant." in x)
    return results, generated


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--um")
    p.add_argument("--flags")
    p.add_argument("--out", required=True)
    p.add_argument("--max", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--survivors", default="hack/mutate-survivors.tsv")
    p.add_argument("--report-only", action="store_true",
                   help="the report of OUT/results.tsv again (with the survivors file as it is)")
    p.add_argument("files", nargs="*", help="FILE[:FIRST-LAST][@MAX[,TIMEOUT]]=KILLER")
    args = p.parse_args()
    if args.report_only:
        report(*read_results(args.out), args)
        return
    c = Campaign(args)
    generated = {}
    for spec in args.files:
        src, killer = spec.split("=", 1)
        span = None
        c.max, c.timeout = args.max, args.timeout
        if "@" in src:  # FILE@MAX,TIMEOUT: a slow killer's own sample size and time limit
            src, limits = src.split("@", 1)
            c.max, c.timeout = (int(limits.split(",")[0]),
                                float(limits.split(",")[1]) if "," in limits else c.timeout)
        if ":" in src:
            src, lines = src.split(":", 1)
            span = tuple(int(x) for x in lines.split("-"))
        generated[src] = c.judge_file(src, killer, span)
    with open(os.path.join(args.out, "results.tsv"), "w") as f:
        for r in c.results:
            f.write("\t".join(str(x) for x in r) + "\n")
    report(c.results, generated, args)


if __name__ == "__main__":
    main()
