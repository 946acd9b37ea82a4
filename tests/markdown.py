"""Markdown as GitHub reads it, for the tests that check the documentation's commands and links.

Only what those tests need: the text outside fenced code blocks, the lines inside them (with
shell continuations joined), and heading anchors as GitHub generates them.
"""

from __future__ import annotations

import re

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose(text: str) -> str:
    """The text outside fenced code blocks (their lines left empty, so line numbers hold)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return "\n".join(out)


def code_lines(text: str) -> list[str]:
    """The lines inside fenced code blocks, with backslash continuations joined."""
    lines, fenced, pending = [], False, ""
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced, pending = not fenced, ""
            continue
        if not fenced:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = LINK.sub(r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown page (a repeated heading gets -1, -2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose(text).splitlines():
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found
