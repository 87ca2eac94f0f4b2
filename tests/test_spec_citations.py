"""Citations of the contract (docs/spec.md) resolve, and the contract keeps up with the code.

The convention, stated at the top of docs/spec.md:
  * a citation names a section by number: ``SPEC 4``, ``SPEC 3.2``, ``SPEC section 5``,
    ``SPEC sections 1-2, 4``, ``SPEC.md section 5``, or a link ``docs/spec.md#spec-5``;
    number N names the explicit anchor ``spec-N`` of docs/spec.md;
  * ``SPEC.md`` or ``docs/spec.md`` alone names the whole document;
  * the short form ``SPEC`` always carries a number, except in the phrase ``SPEC open:``
    followed by a description, which marks a choice the contract leaves open (anchor
    ``spec-open`` lists them).
Anything else that starts like a citation (a bare ``SPEC``, ``SPEC section`` without a
number, ``SPEC open`` without its description, a link to another file's anchor) is reported
with its file and line, as is every section number the contract lacks.

Python files are read through ``tokenize``: only comments and string literals are prose, so a
variable that happens to be called SPEC is not a citation. Markdown and the golden vector JSON
files are read whole. This file and docs/spec.md itself are not scanned (they spell the forms
out as examples); docs/spec.md's own links are checked separately.

The contract itself: anchors are unique and well formed, each numbered heading carries the
anchor of its number, each top-level number keeps its subject, its links resolve. And it keeps
up with the code: section 2.1 defines every Profile field, section 5 names every registered
layout, section 9.1 holds the host messages the conformance suite expects, and the profile
tables of sections 2.4 and 3.6 state the values the profiles have.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "docs" / "spec.md"
SCANNED = (
    "mxgate/**/*.py",
    "tests/**/*.py",
    "scripts/**/*.py",
    "benchmarks/**/*.py",
    "scripts/*.sh",
    ".ci/*",
    "conftest.py",
    "pyproject.toml",
    "README.md",
    "docs/**/*.md",
    "mxgate/vectors/data/*.json",
)
NOT_SCANNED = {CONTRACT, Path(__file__).resolve()}

# The subject of each top-level number: code and golden vectors cite these numbers, so a number
# must keep its subject whatever its title says (a word of the title, case-insensitive).
SUBJECTS = {
    1: "formats",
    2: "element conversion",
    3: "block scale",
    4: "fp8 per-token scale",
    5: "layouts",
    6: "indexer_qk_rope_quant_and_cache",
    7: "scorers",
    8: "triton",
    9: "host rejections",
    10: "top-k",
    11: "acceptable",
}
from mxgate.oracle.profiles import DESCRIPTIVE_FIELDS  # noqa: E402 - Profile fields without semantics

NUMBER = r"\d+(?:\.\d+)*"
_HEAD = re.compile(r"(?<![\w./-])(?P<head>SPEC(?:\.md)?|(?:[\w.-]+/)*spec\.md)(?![\w-])")
_ANCHOR = re.compile(r"#(?P<name>[A-Za-z][\w-]*(?:\.\d+)*)")
_OPEN = re.compile(r"[ \t]+open\b(?P<colon>[ \t]*:[ \t]*(?P<what>\S[^\n]*)?)?")
_GAP = r"[ \t]*(?:\n[ \t]*)?"  # spaces, across at most one line break (wrapped prose)
_KEYWORD = re.compile(rf"(?:'s)?(?=\s){_GAP}(?:(?P<kw>§§?|[Ss]ections?\b|[Ss]ec\.){_GAP})?")
_GLOSS = r"(?:\s*\([^()\n]{0,60}\))?"
_JOIN = r"\s*(?:,\s*(?:and\s+)?|and\s+|&\s*|-|–|to\s+)\s*"
_LIST = re.compile(rf"{NUMBER}{_GLOSS}(?:{_JOIN}{NUMBER}{_GLOSS})*")
_MISSPELT = re.compile(r"(?i)(?<![\w./-])spec(?:\.md)?(?![\w-])(?=(?:'s)?\s+(?:sections?\b|§))")
_ANCHOR_TAG = re.compile(r"""<a\s+(?:id|name)\s*=\s*["']([^"']+)["']\s*>\s*</a>""")
_ANCHOR_NAME = re.compile(rf"spec-(?:{NUMBER}|[a-z][a-z-]*)")
_HEADING = re.compile(r"^(#{1,6})\s+(?:(?P<num>\d+(?:\.\d+)*)\.?\s+)?(?P<title>.*)$")


@dataclass(frozen=True)
class Citation:
    """One place that cites the contract.

    kind: "sections" (numbers), "anchor" (a link), "document" (the whole file), "open" (the
    documented phrase), or "malformed" / "bare" (always a problem). targets: the anchors the
    citation needs. problem: why it does not resolve, "" when it does (against ``anchors``).
    """

    path: str
    line: int
    text: str
    kind: str
    targets: tuple[str, ...]
    problem: str

    def where(self) -> str:
        return f"{self.path}:{self.line}: {self.text!r}: {self.problem}"


# ---- reading the sources -------------------------------------------------------------------


def python_prose(text: str) -> str:
    """The comments and string contents of Python source, everything else blanked to spaces
    (newlines kept, so offsets and line numbers stay those of the file). Source that does not
    tokenize is returned whole: scanning more never hides a citation."""
    lines = io.StringIO(text).readlines()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = [c if c == "\n" else " " for c in text]
    fstring_middle = getattr(tokenize, "FSTRING_MIDDLE", None)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in (tokenize.COMMENT, tokenize.STRING) and tok.type != fstring_middle:
                continue
            first = starts[tok.start[0] - 1] + tok.start[1]
            last = starts[tok.end[0] - 1] + tok.end[1]
            if tok.type == tokenize.COMMENT:
                first += 1  # the '#'
            elif tok.type == tokenize.STRING:
                opening = re.match(r"(?i)[rbuf]*('''|\"\"\"|'|\")", text[first:last])
                if opening:  # the literal's prefix and quotes are not prose
                    first += opening.end()
                    last -= len(opening.group(1))
            out[first:last] = text[first:last]
    except (tokenize.TokenError, SyntaxError):
        return text
    return "".join(out)


def scanned_files() -> list[Path]:
    found: set[Path] = set()
    for pattern in SCANNED:
        found.update(p.resolve() for p in ROOT.glob(pattern) if p.is_file())
    return sorted(found - NOT_SCANNED)


def prose_of(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return python_prose(text) if path.suffix == ".py" else text


# ---- recognising citations -----------------------------------------------------------------


def _section_numbers(listed: str) -> tuple[list[str], str]:
    """'1-2, 4' -> (['1', '2', '4'], ''); a range over dotted numbers or backwards is a problem."""
    plain = re.sub(r"\([^()]*\)", " ", listed)
    parts = re.split(rf"({_JOIN})", plain)
    numbers: list[str] = []
    problem = ""
    for i in range(0, len(parts), 2):
        number = parts[i].strip()
        joint = parts[i - 1].strip() if i else ","
        if joint in ("-", "–", "to") and numbers:
            low = numbers[-1]
            if "." in low or "." in number or int(number) < int(low):
                problem = f"range {low}{joint}{number} is not a range of whole sections"
                numbers.append(number)
                continue
            numbers.extend(str(n) for n in range(int(low) + 1, int(number) + 1))
        else:
            numbers.append(number)
    return numbers, problem


def _link_target_ok(head: str, path: Path, text: str, start: int) -> bool:
    """A markdown link ``](...spec.md#x)`` must lead to docs/spec.md from the linking file; a
    plain mention names it as ``spec.md`` or by a path from the repository root or the file."""
    if head == "SPEC.md":
        return True
    if path.suffix == ".md" and text[max(0, start - 2):start] == "](":
        return (path.parent / head).resolve() == CONTRACT
    return head == "spec.md" or (ROOT / head).resolve() == CONTRACT or (path.parent / head).resolve() == CONTRACT


def citations_in(text: str, path: Path, rel: str) -> list[Citation]:
    """Every citation of the contract in ``text`` (prose of ``path``), classified."""
    found = []
    for m in _HEAD.finditer(text):
        head, start, end = m.group("head"), m.start(), m.end()
        line = text.count("\n", 0, start) + 1
        kind, targets, problem = "", (), ""
        anchor = _ANCHOR.match(text, end) if head != "SPEC" else None
        opened = _OPEN.match(text, end) if head == "SPEC" else None
        keyword = _KEYWORD.match(text, end)
        listed = _LIST.match(text, keyword.end()) if keyword else None
        if anchor:
            kind, targets, end = "anchor", (anchor.group("name"),), anchor.end()
            if not _link_target_ok(head, path, text, start):
                problem = f"{head} is not a path to docs/spec.md from {rel}"
        elif opened:
            end = opened.end()
            if opened.group("what"):
                kind, targets = "open", ("spec-open",)
            else:
                kind, problem = "malformed", "'SPEC open' must be followed by ': <what the contract leaves open>'"
        elif listed:
            numbers, problem = _section_numbers(listed.group(0))
            kind, targets, end = "sections", tuple(f"spec-{n}" for n in numbers), listed.end()
        elif keyword and keyword.group("kw"):
            end = keyword.end()
            kind, problem = "malformed", f"'{keyword.group('kw')}' is not followed by a section number"
        elif head == "SPEC":
            kind, problem = "bare", "'SPEC' names no section (cite 'SPEC N', or write 'SPEC open: ...')"
        else:
            kind = "document"
        snippet = " ".join(text[start:max(end, start + 40)].split())[:80]
        found.append(Citation(rel, line, snippet, kind, targets, problem))
    for m in _MISSPELT.finditer(text):  # "Spec section 5", "Spec.md section 5": spelt otherwise
        if m.group(0) not in ("SPEC", "SPEC.md", "spec.md"):
            line = text.count("\n", 0, m.start()) + 1
            snippet = " ".join(text[m.start():m.start() + 40].split())
            found.append(Citation(rel, line, snippet, "malformed", (), f"write {m.group(0)!r} as 'SPEC'"))
    return sorted(found, key=lambda c: c.line)


def contract_anchors(text: str) -> list[str]:
    return _ANCHOR_TAG.findall(text)


def resolve(citations: list[Citation], anchors: set[str]) -> list[Citation]:
    """The citations with their problem filled in for targets the contract lacks."""
    out = []
    for c in citations:
        missing = [t for t in c.targets if t not in anchors]
        if missing and not c.problem:
            c = Citation(c.path, c.line, c.text, c.kind, c.targets,
                         f"docs/spec.md has no anchor {', '.join(missing)}")
        out.append(c)
    return out


def collect() -> list[Citation]:
    anchors = set(contract_anchors(CONTRACT.read_text(encoding="utf-8")))
    found: list[Citation] = []
    for path in scanned_files():
        rel = path.relative_to(ROOT).as_posix()
        found += citations_in(prose_of(path), path, rel)
    return resolve(found, anchors)


def counts_per_section(citations: list[Citation]) -> Counter:
    """How often each anchor is cited (the report of the contract's use)."""
    return Counter(t for c in citations for t in c.targets)


# ---- the contract's own structure ------------------------------------------------------------


def contract_text() -> str:
    return CONTRACT.read_text(encoding="utf-8")


def headings_with_anchors(text: str) -> list[tuple[int, str | None, str, list[str]]]:
    """(line, number or None, title, anchors on the lines right above) for every heading."""
    lines = text.splitlines()
    out = []
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = _HEADING.match(line)
        if fenced or not m:
            continue
        above: list[str] = []
        j = i - 1
        while j >= 0 and _ANCHOR_TAG.fullmatch(lines[j].strip()):
            above += _ANCHOR_TAG.findall(lines[j])
            j -= 1
        out.append((i + 1, m.group("num"), m.group("title"), above))
    return out


def section_text(text: str, anchor: str) -> str:
    """The text from an anchor to the next anchor of the same or a higher level."""
    tag = f'<a id="{anchor}"></a>'
    if tag not in text:
        raise AssertionError(f"docs/spec.md has no anchor {anchor}")
    rest = text.split(tag, 1)[1]
    depth = anchor.count(".")
    for m in _ANCHOR_TAG.finditer(rest):
        name = m.group(1)
        if re.fullmatch(rf"spec-{NUMBER}", name) and name.count(".") <= depth:
            return rest[:m.start()]
    return rest


# ---- tests: citations ----------------------------------------------------------------------


def test_every_citation_resolves() -> None:
    citations = collect()
    assert citations, "no citation of the contract found at all: the scan is broken"
    problems = [c.where() for c in citations if c.problem]
    assert not problems, (f"{len(problems)} citation(s) of docs/spec.md do not resolve "
                          "(convention: top of docs/spec.md):\n" + "\n".join(problems))


def test_the_golden_vectors_cite_existing_sections() -> None:
    """The vector files must stay byte-identical, so the contract adapts to them, not the
    reverse: every section they cite exists."""
    anchors = set(contract_anchors(contract_text()))
    vectors = [p for p in scanned_files() if p.suffix == ".json"]
    assert vectors, "no golden vector files found"
    cited = [c for p in vectors for c in citations_in(p.read_text(encoding="utf-8"), p, p.name)]
    assert any(c.kind == "sections" for c in cited), "the golden vectors cite no section: the scan is broken"
    problems = [c.where() for c in resolve(cited, anchors) if c.problem]
    assert not problems, "\n".join(problems)


# ---- tests: the recogniser itself ----------------------------------------------------------

_EXAMPLES = [
    ("see SPEC 4: the scale", "sections", ("spec-4",), False),
    ("SPEC 3.2 says", "sections", ("spec-3.2",), False),
    ("(SPEC section 5)", "sections", ("spec-5",), False),
    ("SPEC sections 1-2, 4).", "sections", ("spec-1", "spec-2", "spec-4"), False),
    ("SPEC sections 1 (E8M0), 3 and 4", "sections", ("spec-1", "spec-3", "spec-4"), False),
    ("SPEC section 6's messages", "sections", ("spec-6",), False),
    ("SPEC.md section 5", "sections", ("spec-5",), False),
    ("cache of SPEC\n    section 5 here", "sections", ("spec-5",), False),
    ("docs/spec.md#spec-5.", "anchor", ("spec-5",), False),
    ("a profile choice SPEC.md marks unverified", "document", (), False),
    ("written in docs/spec.md, the contract", "document", (), False),
    ("SPEC open: satfinite is defined for fn only", "open", ("spec-open",), False),
    ("SPEC open here", "malformed", (), True),
    ("SPEC section five", "malformed", (), True),
    ("SPEC: exact for D = 128", "bare", (), True),
    ("SPEC's bitwise ceil_pow2", "bare", (), True),
    ("SPEC sections 3-2", "sections", ("spec-3", "spec-2"), True),
    ("docs/other.md#spec-5", None, (), False),
    ("SPECIAL_BLOCKS and ProjectSpec", None, (), False),
    ("the Spec section 5 says", "malformed", (), True),
    ("importlib's spec.loader, the spec's origin", None, (), False),
]


@pytest.mark.parametrize("text, kind, targets, flagged", _EXAMPLES, ids=[e[0] for e in _EXAMPLES])
def test_recogniser(text: str, kind: str | None, targets: tuple[str, ...], flagged: bool) -> None:
    found = citations_in(text, ROOT / "mxgate" / "example.py", "mxgate/example.py")
    if kind is None:
        assert found == [], found
        return
    assert len(found) == 1, found
    (c,) = found
    assert (c.kind, c.targets, bool(c.problem)) == (kind, targets, flagged), c


def test_an_unknown_section_is_reported_with_file_and_line() -> None:
    text = "x = 1\n# fine: SPEC 4\n# wrong: SPEC 99.7\n"
    (ok, bad) = resolve(citations_in(python_prose(text), ROOT / "t.py", "t.py"), {"spec-4"})
    assert not ok.problem
    assert bad.where().startswith("t.py:3: ") and "spec-99.7" in bad.problem


def test_python_code_is_not_prose_but_its_strings_and_comments_are() -> None:
    text = 'SPEC = make(SPEC.x)  # SPEC 2\ny = f"SPEC 3" + """\nSPEC 5\n"""\n'
    found = citations_in(python_prose(text), ROOT / "t.py", "t.py")
    assert [(c.line, c.targets) for c in found] == [(1, ("spec-2",)), (2, ("spec-3",)), (3, ("spec-5",))]


def test_a_markdown_link_must_lead_to_the_contract() -> None:
    page = ROOT / "docs" / "ops" / "page.md"
    good = citations_in("[x](../spec.md#spec-6)", page, "docs/ops/page.md")
    bad = citations_in("[x](spec.md#spec-6)", page, "docs/ops/page.md")
    assert not good[0].problem
    assert "not a path to docs/spec.md" in bad[0].problem


# ---- tests: the contract's structure -------------------------------------------------------


def test_anchors_are_unique_and_well_formed() -> None:
    anchors = contract_anchors(contract_text())
    repeated = sorted(a for a, n in Counter(anchors).items() if n > 1)
    assert not repeated, f"anchors used more than once in docs/spec.md: {repeated}"
    odd = [a for a in anchors if not _ANCHOR_NAME.fullmatch(a)]
    assert not odd, f"anchors not of the form spec-N, spec-N.M or spec-word: {odd}"


def test_numbered_headings_carry_their_anchor() -> None:
    """Each numbered heading has the anchor of its own number on the line(s) above, and every
    numbered anchor sits on a heading of that number, under its parent section."""
    placed: set[str] = set()
    for line, number, title, above in headings_with_anchors(contract_text()):
        numeric = [a for a in above if re.fullmatch(rf"spec-{NUMBER}", a)]
        if number is None:
            assert not numeric, f"docs/spec.md:{line}: numbered anchor {numeric} on an unnumbered heading {title!r}"
            continue
        assert numeric == [f"spec-{number}"], f"docs/spec.md:{line}: heading {number} has anchors {above}"
        placed.add(numeric[0])
    anchors = set(contract_anchors(contract_text()))
    stray = sorted(a for a in anchors if re.fullmatch(rf"spec-{NUMBER}", a) and a not in placed)
    assert not stray, f"numbered anchors that are not on a heading of their number: {stray}"
    orphans = sorted(a for a in placed if "." in a and a.rsplit(".", 1)[0] not in placed)
    assert not orphans, f"subsections without their parent section: {orphans}"


def test_each_number_keeps_its_subject() -> None:
    titles = {number: title.lower() for _, number, title, _ in headings_with_anchors(contract_text()) if number}
    for number, subject in SUBJECTS.items():
        assert str(number) in titles, f"docs/spec.md has no section {number} ({subject})"
        assert subject in titles[str(number)], f"section {number} is {titles[str(number)]!r}, cited as {subject!r}"


def test_the_convention_is_stated_before_section_1() -> None:
    text = contract_text()
    assert {"spec-conventions", "spec-open"} <= set(contract_anchors(text))
    preamble = text.split('<a id="spec-1"></a>', 1)[0]
    for phrase in ("`SPEC 4`", "`SPEC section 5`", "docs/spec.md#spec-5", "`SPEC open:`", "test_spec_citations.py"):
        assert phrase in preamble, f"the citation convention before section 1 does not mention {phrase}"


def test_links_inside_the_contract_resolve() -> None:
    text = contract_text()
    anchors = set(contract_anchors(text))
    problems = []
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        page, _, anchor = target.partition("#")
        if re.match(r"[a-z]+://", target):
            continue
        if page and not (CONTRACT.parent / page).is_file():
            problems.append(f"docs/spec.md:{line}: {target}: no such file")
        elif not page and anchor not in anchors:
            problems.append(f"docs/spec.md:{line}: {target}: no such anchor")
    assert not problems, "\n".join(problems)


# ---- tests: the contract covers the code's vocabulary --------------------------------------


def test_every_profile_field_is_defined_in_section_2_1() -> None:
    from mxgate.oracle.profiles import Profile

    table = section_text(contract_text(), "spec-2.1")
    listed = set()
    for row in re.findall(r"^\|([^|\n]*)\|", table, flags=re.M):
        listed.update(re.findall(r"`(\w+)`", row))
    names = {f.name for f in fields(Profile)}
    missing = sorted(names - DESCRIPTIVE_FIELDS - listed)
    assert not missing, f"Profile fields the table of docs/spec.md section 2.1 does not define: {missing}"
    stale = sorted(listed - names)
    assert not stale, f"section 2.1 lists fields Profile does not have: {stale}"


def test_every_layout_is_described_in_section_5() -> None:
    from mxgate.oracle import layouts

    text = section_text(contract_text(), "spec-5")
    missing = [name for name in layouts.names() if f"`{name}`" not in text]
    assert not missing, f"layouts docs/spec.md section 5 does not describe: {missing}"


def test_the_rejection_messages_are_those_of_section_9_1() -> None:
    from mxgate.conformance.test_indexer_conformance import REJECTIONS

    text = section_text(contract_text(), "spec-9.1")
    missing = []
    for name, _, message in REJECTIONS:
        fixed = re.split(r", got ", message)[0]  # the value after "got" is the test's own
        if fixed not in text:
            missing.append(f"{name}: {fixed!r}")
    assert not missing, "host messages missing from docs/spec.md section 9.1:\n" + "\n".join(missing)


def _table_rows(section: str) -> list[list[str]]:
    """The body rows of the markdown tables in ``section`` (header and rule rows dropped)."""
    rows, previous = [], ""
    for line in section.splitlines():
        if not line.startswith("|"):
            previous = ""
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if previous and not re.fullmatch(r"[-| :]+", line):
            rows.append(cells)
        previous = line
    return [r for r in rows if not all(re.fullmatch(r"-+", c) for c in r)]


def _profiles_of(cell: str):
    from mxgate.oracle.ops.quant_vllm import profile  # the registered ones and vllm-rocm

    names = re.findall(r"`([\w-]+)`", cell)
    assert names, f"no profile named in the table cell {cell!r}"
    return [profile(n) for n in names]


def test_the_element_table_of_section_2_4_is_the_profiles() -> None:
    rows = _table_rows(section_text(contract_text(), "spec-2.4"))
    assert rows, "section 2.4 has no profile table"
    for cells in rows:
        for p in _profiles_of(cells[0]):
            stated = dict(zip(("tie", "zero_sign", "nan", "inf"), (c.split()[0] for c in cells[2:6])))
            actual = {k: getattr(p, k) for k in stated}
            assert stated == actual, f"section 2.4 row {cells[0]}: {stated} but the profile {p.name} has {actual}"


def _floor_of(cell: str) -> tuple[float | None, str | None]:
    if cell.startswith("none"):
        return None, None
    value, where = cell.split()[:2]
    m = re.fullmatch(r"(\d+)·2\^(-?\d+)", value)
    return (int(m.group(1)) * 2.0 ** int(m.group(2)) if m else float(value)), where


def test_the_scale_table_of_section_3_6_is_the_profiles() -> None:
    import numpy as np

    from mxgate import oracle

    rows = _table_rows(section_text(contract_text(), "spec-3.6"))
    assert rows, "section 3.6 has no profile table"
    for cells in rows:
        policy, arithmetic, floor, clamp, special, amax_nan, zero_group = cells[1:8]
        for p in _profiles_of(cells[0]):
            where = f"section 3.6 row {cells[0]}, profile {p.name}"
            assert p.scale_policy == policy, f"{where}: policy {policy} but {p.scale_policy}"
            if p.scale_policy.startswith("rceil"):
                assert p.scale_arithmetic == arithmetic, f"{where}: arithmetic {arithmetic} but {p.scale_arithmetic}"
            value, floor_where = _floor_of(floor)
            assert (p.amax_floor is None) == (value is None), f"{where}: floor {floor} but {p.amax_floor}"
            if value is not None:
                assert np.float32(p.amax_floor) == np.float32(value) and p.floor_where == floor_where, \
                    f"{where}: floor {floor} but {p.amax_floor} {p.floor_where}"
            bounds = re.match(r"\[(\d+), (\d+)\]", clamp)
            assert p.exp_clamp == (tuple(map(int, bounds.groups())) if bounds else None), \
                f"{where}: clamp {clamp} but {p.exp_clamp}"
            byte = int(oracle.e8m0_scale(np.float32([np.inf]), p)[0])
            assert f"{byte:#04X}".replace("0X", "0x") == special or special.endswith(f" {byte}"), \
                f"{where}: an Inf amax gives byte {byte}, the table says {special!r}"
            assert p.amax_nan == amax_nan, f"{where}: amax_nan {amax_nan} but {p.amax_nan}"
            zero = int(oracle.quantize_mx(np.zeros(32, np.float32), p)[1][0])
            assert zero == int(zero_group), f"{where}: an all-zero group gives byte {zero}, the table says {zero_group}"
