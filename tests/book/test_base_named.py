"""The base is named as what it is: Debian's linux-source package, not plain upstream Linux.

Every committed run was built from the tarball of Debian's ``linux-source-<series>`` binary
package (upstream plus Debian's patch series; see ``book/pipeline.md``, "Base source"). The
front matter a reader sees first must not call that "Linux <version>" without saying so. The
package, the Debian version and the upstream version come from ``configs/source.yaml``, so the
test follows the pin.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from lab import ROOT

PIN = yaml.safe_load((ROOT / "configs" / "source.yaml").read_text())
PACKAGE = PIN["linux_source"]["package"]
DEBIAN_VERSION = PIN["debian_version"]
VERSION = PIN["version"]

MARKDOWN = ("README.md", "book/pipeline.md")
CITATION = "CITATION.cff"

# "Linux 7.2.13", "Linux kernel 7.2.13", across a line break; not "Linux 7.2.130"
PLAIN = re.compile(rf"\bLinux(?:\s+kernel)?\s+{re.escape(VERSION)}(?![\w.])")
# a new passage starts at a table row or a list item, as well as after a blank line
ITEM = re.compile(r"\s*(\||[-*+]\s|\d+\.\s)")


@dataclass(frozen=True)
class Passage:
    """A paragraph, table row, list item or CITATION.cff string, and where it is."""

    where: str
    text: str


def markdown_passages(text: str, name: str) -> Iterator[Passage]:
    """Split Markdown into paragraphs, and paragraphs into table rows and list items."""
    lines: list[str] = []
    start = 0
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if lines and (not line.strip() or ITEM.match(line)):
            yield Passage(f"{name}:{start}", "\n".join(lines))
            lines = []
        if line.strip():
            if not lines:
                start = number
            lines.append(line)


def yaml_passages(node: object, name: str, path: str = "") -> Iterator[Passage]:
    """Every string in a YAML document, named by its key path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from yaml_passages(value, name, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from yaml_passages(value, name, f"{path}[{index}]")
    elif isinstance(node, str):
        yield Passage(f"{name}:{path}", node)


def qualified(passage: Passage) -> bool:
    """Does the passage say the base is Debian's package, with its version?"""
    return "Debian" in passage.text and PACKAGE in passage.text and DEBIAN_VERSION in passage.text


def unqualified(passages: Iterator[Passage]) -> list[Passage]:
    """Passages that say "Linux <version>" without naming Debian's package and version."""
    return [p for p in passages if PLAIN.search(p.text) and not qualified(p)]


def passages_of(name: str) -> list[Passage]:
    """The passages of one of the checked files."""
    text = (ROOT / name).read_text()
    if name == CITATION:
        return list(yaml_passages(yaml.safe_load(text), name))
    return list(markdown_passages(text, name))


def test_the_pin_names_a_debian_package() -> None:
    assert PACKAGE.startswith("linux-source-") and VERSION.startswith(PACKAGE.split("-")[-1])
    assert DEBIAN_VERSION.startswith(f"{VERSION}-")


@pytest.mark.parametrize("name", [*MARKDOWN, CITATION])
def test_no_plain_upstream_name_for_the_base(name: str) -> None:
    bad = unqualified(iter(passages_of(name)))
    assert not bad, (
        f"{name} calls the base 'Linux {VERSION}' without saying it is Debian's {PACKAGE} "
        f"{DEBIAN_VERSION} (upstream plus Debian's patch series); name it so in the same "
        "paragraph:\n" + "\n".join(f"  {p.where}: {' '.join(p.text.split())[:160]}" for p in bad)
    )


@pytest.mark.parametrize("name", [*MARKDOWN, CITATION])
def test_the_base_is_named_with_its_debian_package(name: str) -> None:
    assert any(qualified(p) for p in passages_of(name)), (
        f"{name} never names the base as Debian's {PACKAGE} {DEBIAN_VERSION}"
    )


def test_the_check_tells_plain_from_qualified() -> None:
    plain = [
        f"kernels on a pinned base (Linux {VERSION}).",
        f"| source | fetches the pinned Linux\n{VERSION} through apt |",
        f"our port onto Linux kernel {VERSION}, in patches/",
    ]
    fine = [
        f"Debian's `{PACKAGE}` {DEBIAN_VERSION}: upstream Linux {VERSION} plus Debian's series.",
        f"the change is already in {VERSION}",
        f"Linux {VERSION}0 is another kernel",
    ]
    for text in plain:
        assert unqualified(iter([Passage("t", text)])), text
    for text in fine:
        assert not unqualified(iter([Passage("t", text)])), text


def test_a_qualified_paragraph_does_not_cover_the_next_row() -> None:
    text = (f"Debian's {PACKAGE} {DEBIAN_VERSION}, upstream Linux {VERSION} plus patches.\n"
            f"| stage | what |\n| source | fetches Linux {VERSION} |\n")
    [bad] = unqualified(markdown_passages(text, "t.md"))
    assert bad.where == "t.md:3"


def test_citation_strings_are_checked_by_key() -> None:
    doc = {"abstract": f"benchmarks on a pinned base (Linux {VERSION}).", "title": "t"}
    [bad] = unqualified(yaml_passages(doc, "CITATION.cff"))
    assert bad.where == "CITATION.cff:abstract"
