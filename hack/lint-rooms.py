#!/usr/bin/env python3
"""make lint, step "rooms": what a part may do to another room (docs/layout.md).

1. No call from one room of src/controllers/ to a `*_set_*` function another room of
   src/controllers/ declares: a part reads what it needs from the process (runtime/manager.h),
   nobody hands it in from outside.
2. No write to a field of a struct another room of src/controllers/ declares with its fields,
   through a pointer of that type (`struct devobjs *d; d->claims = ...`): a room's structs are
   written by its own files. What a caller fills by design is exempt: a struct named
   `*_config`, `*_job`, `*_request` (a module's input), and initialisers
   (`struct x c = {.a = ...}`).
Prints one line per finding; exits 1 when there are any.
"""
import glob
import os
import re
import sys


def room(path):
    return os.path.dirname(path[len("src/"):])


def controllers_room(path):
    r = room(path)
    return r if r.startswith("controllers") else None


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def main():
    headers = sorted(glob.glob("src/controllers/**/*.h", recursive=True))
    sources = sorted(glob.glob("src/controllers/**/*.c", recursive=True))
    setters = {}  # function -> room
    structs = {}  # struct name -> (room, fields)
    for h in headers:
        text = strip_comments(open(h).read())
        for m in re.finditer(r"\b([a-z][a-z0-9_]*_set_[a-z0-9_]+)\s*\(", text):
            setters.setdefault(m.group(1), controllers_room(h))
        for m in re.finditer(r"\bstruct\s+([a-z_][a-z0-9_]*)\s*\{(.*?)\n\};", text, flags=re.S):
            fields = set(re.findall(r"([a-z_][a-z0-9_]*)\s*(?:\[[^\]]*\])?\s*[;,]", m.group(2)))
            structs[m.group(1)] = (controllers_room(h), fields)
    bad = []
    for c in sources:
        r = controllers_room(c)
        text = strip_comments(open(c).read())
        for n, line in enumerate(text.split("\n"), 1):
            for m in re.finditer(r"\b([a-z][a-z0-9_]*_set_[a-z0-9_]+)\s*\(", line):
                owner = setters.get(m.group(1))
                if owner and owner != r:
                    bad.append(f"{c}:{n}: calls {m.group(1)}() of {owner}: a part takes what it "
                               "reads from the process (runtime/manager.h), nobody sets it from outside")
        pointers = {}
        for m in re.finditer(r"\bstruct\s+([a-z_][a-z0-9_]*)\s*\*\s*(?:const\s+)?([a-z_][a-z0-9_]*)", text):
            pointers[m.group(2)] = m.group(1)
        for n, line in enumerate(text.split("\n"), 1):
            for m in re.finditer(r"\b([a-z_][a-z0-9_]*)->([a-z_][a-z0-9_]*)\s*=[^=]", line):
                st = pointers.get(m.group(1))
                if st not in structs:
                    continue
                owner, fields = structs[st]
                if st.endswith(("_config", "_job", "_request")):
                    continue
                if owner and owner != r and m.group(2) in fields:
                    bad.append(f"{c}:{n}: writes {m.group(1)}->{m.group(2)} of struct {st} ({owner}): "
                               "a room's structs are written by its own files")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sys.exit(main())
