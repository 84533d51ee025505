#!/usr/bin/python3
"""Every citation of the specification in code and docs ("docs/SPEC.md
section N", "SPEC.md#anchor") names a section that docs/SPEC.md has, and no
file cites a design document outside the repository.

usage: spec_refs.py SRC
"""
import os
import re
import subprocess
import sys

FORBIDDEN = re.compile(r"DESIGN section|DESIGN\.md|\.\./shared/")
SECTION = re.compile(r"SPEC\.md(?:\]\([^)]*\))?,? sections? (\d)(?: and (\d))?")
ANCHOR = re.compile(r"SPEC\.md#([a-z0-9-]+)")


def anchors(spec):
    """GitHub-style anchors and numbers of the spec's "## N. Title" headings."""
    numbers, slugs = set(), set()
    for line in spec.splitlines():
        m = re.match(r"## (\d)\. (.*)", line)
        if m:
            numbers.add(m.group(1))
            slug = re.sub(r"[^a-z0-9 -]", "", line[3:].lower()).replace(" ", "-")
            slugs.add(slug)
    return numbers, slugs


def main():
    src = sys.argv[1]
    files = subprocess.run(["git", "-C", src, "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    with open(os.path.join(src, "docs", "SPEC.md")) as f:
        numbers, slugs = anchors(f.read())
    assert numbers == {"1", "2", "3", "4", "5", "6"}, numbers
    bad, cited = [], 0
    for name in files:
        if name.startswith("tests/docs/"):
            continue
        try:
            with open(os.path.join(src, name), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                bad.append(f"{name}:{i}: cites a document outside the repository: {line.strip()}")
            for m in SECTION.finditer(line):
                cited += 1
                for n in filter(None, m.groups()):
                    if n not in numbers:
                        bad.append(f"{name}:{i}: no section {n} in docs/SPEC.md")
            for m in ANCHOR.finditer(line):
                cited += 1
                if m.group(1) not in slugs:
                    bad.append(f"{name}:{i}: no anchor #{m.group(1)} in docs/SPEC.md")
    assert cited >= 20, f"only {cited} citations found: the patterns no longer match"
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print(f"{cited} citations of docs/SPEC.md, all to existing sections")


if __name__ == "__main__":
    main()
