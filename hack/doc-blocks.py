#!/usr/bin/env python3
"""hack/doc-blocks.py FILE HEADING [N] - prints the Nth (from 1; default 1) fenced code block
of FILE's section HEADING (a Markdown heading's text, any level; the section ends at the next
heading of the same or a higher level), without its fences and with the block's indentation
taken off (blocks inside list items). Exits 1 when there is no such block. For tests that run
what the docs say, to the letter (test/integration/test_install_docs.sh)."""
import re
import sys


def main():
    path, heading = sys.argv[1], sys.argv[2]
    want = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    lines = open(path, encoding="utf-8").read().splitlines()
    level, n, block, indent = None, 0, None, ""
    for line in lines:
        m = re.match(r"^(#+) (.*)$", line)
        if block is None and m:
            if level is not None and len(m.group(1)) <= level:
                break
            if m.group(2).strip() == heading:
                level = len(m.group(1))
            continue
        if level is None:
            continue
        fence = re.match(r"^(\s*)```", line)
        if block is None and fence:
            block, indent = [], fence.group(1)
        elif block is not None and fence:
            n += 1
            if n == want:
                print("\n".join(block))
                return 0
            block = None
        elif block is not None:
            block.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
    print(f"doc-blocks: no block {want} in section '{heading}' of {path}", file=sys.stderr)
    return 1


sys.exit(main())
