#!/usr/bin/env python3
"""conf-man.py HEAD.md CONFIGURATION.md - the markdown of smuxfs.conf(5).

Prints HEAD.md, then docs/configuration.md from its "## [mount]" section
on, in the shape go-md2man renders well on a terminal: each row of a
key table ("| key | meaning | default |") becomes a definition ("key" then
the meaning and "Default: ..."), headings move up one level (a man page's
sections are "#"). The reference stays in one place (docs/); the man page
is made from it at build time (make man).
"""
import sys


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def main():
    head, conf = sys.argv[1], sys.argv[2]
    out = [open(head, encoding="utf-8").read().rstrip("\n"), ""]
    lines = open(conf, encoding="utf-8").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("## [mount]"))
    header = None
    for line in lines[start:]:
        if line.startswith("|"):
            row = cells(line)
            if header is None:
                header = row
                continue
            if set("".join(row)) <= set("-: "):
                continue  # the |---|---| line
            term, rest = row[0], row[1:]
            out.append(term)
            text = rest[0] if rest else ""
            if len(rest) > 1 and rest[1] not in ("", "—"):
                text += ". Default: " + rest[1]
            out.append(":   " + text)
            out.append("")
            continue
        header = None
        if line.startswith("#"):
            line = line[1:]
        out.append(line)
    out += ["", "# SEE ALSO", "", "**smuxfs**(8), **smuxctl**(8)", ""]
    sys.stdout.write("\n".join(out))


main()
