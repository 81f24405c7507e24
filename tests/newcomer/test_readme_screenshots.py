"""The README shows the playground, the conversation page, the desk and the flow editor (issue
55): pictures kept in the repository, small, and taken by the suite's own browser tests
(`keep(page, name)` in a test that `make screenshots` runs), so they can be taken again."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from readme_screenshots import README_SHOTS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a JPEG's start-of-frame marker."""
    assert data[:2] == b"\xff\xd8", "not a JPEG"
    i = 2
    while i < len(data):
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    raise AssertionError("no start-of-frame marker")


def test_the_readme_shows_the_four_pages_from_files_in_the_repository():
    shown = re.findall(r"!\[[^\]]+\]\((docs/screenshots/[^)]+)\)", README)
    assert shown == [f"docs/screenshots/{name}.jpg" for name in README_SHOTS]
    for path in shown:
        data = (ROOT / path).read_bytes()
        width, height = jpeg_size(data)
        assert (width, height) >= (1200, 800), path  # readable
        assert len(data) < 150_000, f"{path} is {len(data)} bytes: too big to keep in the repository"


def test_each_picture_is_taken_by_a_test_that_make_screenshots_runs():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    listed = re.findall(r"(tests/\S+\.py)::(\w+)", makefile.split("SCREENSHOT_TESTS :=")[1].split("\n\n")[0])
    taken = set()
    for path, test in listed:
        source = (ROOT / path).read_text(encoding="utf-8")
        body = source.split(f"def {test}(")[1].split("\ndef ")[0]
        taken.update(re.findall(r'keep\(\w+, "([\w-]+)"', body))
    assert taken == set(README_SHOTS)
    assert "make screenshots" in README
