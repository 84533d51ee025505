#!/usr/bin/python3
"""docs/REPORT.md's examples are what the current sfctl prints.

usage: report_examples.py SFCTL SOURCE_DIR

Every example in REPORT.md follows a marker line

    <!-- sfctl replay ARGS... | window N -->

and is the fenced block right after it. The test runs `sfctl replay ARGS`
in the source directory and requires the block to equal, byte for byte, the
paragraph of its output that starts "window N:" (a window's human view ends
at a blank line). A document with no marker fails: the check must check
something.
"""
import re
import shlex
import subprocess
import sys

MARKER = re.compile(r"^<!-- sfctl (replay .*) \| window (\d+) -->$")


def examples(text):
    """(args, window, block) of each marked example."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            sys.exit("REPORT.md line %d: a marker without a fenced block after it" % (i + 1))
        end = lines.index("```", i + 2)
        out.append((shlex.split(m.group(1)), int(m.group(2)), "\n".join(lines[i + 2:end])))
    return out


def window_paragraph(stdout, window):
    for para in stdout.split("\n\n"):
        if para.startswith("window %d:" % window) or para.startswith("window %d " % window):
            return para.rstrip("\n")
    return None


def main():
    sfctl, src = sys.argv[1], sys.argv[2]
    with open(src + "/docs/REPORT.md") as f:
        found = examples(f.read())
    if not found:
        sys.exit("REPORT.md has no checked example")
    bad = 0
    for args, window, block in found:
        p = subprocess.run([sfctl] + args, cwd=src, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            print("FAIL: sfctl %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
            bad += 1
            continue
        got = window_paragraph(p.stdout, window)
        if got != block:
            print("FAIL: sfctl %s, window %d: REPORT.md shows\n%s\nsfctl prints\n%s"
                  % (" ".join(args), window, block, got))
            bad += 1
    if bad:
        sys.exit(1)
    print("PASS: %d examples" % len(found))


if __name__ == "__main__":
    main()
