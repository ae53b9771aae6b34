"""Every citation in the repository points at a place a reader can open.

Docstrings, comments, presets and Markdown cite the papers by name and by section, equation, table,
figure or algorithm (``Gürbüz thesis §5.3.4.1``, ``GSP paper Eq. 4.1``; the papers are listed in
docs/references.md). They must not cite the line numbers of a text that is not in the repository
(``L1264``, ``seed 004 L737``) or the project's private working notes (``spec §9 A6``,
``psomas spec §1.8``, ``ecosystem §1.3``, ``reference-implementations §1.2``), which a reader cannot
follow.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the folder of private notes beside the checkout, by a relative and by this machine's absolute path
NOTES = Path(os.pardir) / "shared"
NOTES_ABSOLUTE = ROOT.parent / NOTES.name
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".txt", ".toml", ".c", ".json")
FORBIDDEN = re.compile(
    r"\b[Ss]eeds?\s+00\d\b"  # seed 000 ... seed 004
    r"|\b(?:[Pp]somas\s+|[Gg]urbuz\s+|[Tt]hesis\s+)?spec(?:'s)?\s*§"  # spec §9 A6, psomas spec §1.8
    r"|\bspec A\d{1,2}\b|§\d+[ -][A-E]\d{1,2}\b"  # spec A14; an item such as §9 A6
    r"|\becosystem §|\breference-implementations\b|\bref-impl\b"  # ecosystem §1.3
    r"|(?<![\w/.-])L\d{2,5}(?:\s*[–-]\s*L?\d{2,5})?\b(?![\w/])"  # L1264, L729-753 (not L2, L_ZS)
    r"|\blines? \d{2,5}(?:\s*[–-]\s*\d{2,5})?\b(?= *[;,)])"  # "line 163;", "lines 552-567)"
    rf"|{re.escape(NOTES.as_posix())}|{re.escape(NOTES_ABSOLUTE.as_posix())}"
)
ALLOWED = {"tests/docs/test_citations.py"}
#: the authors' code vendored at a pinned commit for the step-parity tests: its headers and
#: README cite the lines of that commit, which a reader opens at the commit named there
VENDORED = "tests/parity/vendor/"


def hits(text: str) -> list[str]:
    return [match.group(0) for match in FORBIDDEN.finditer(text)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Gürbüz thesis §3.3.2.1 (seed 004 L737)", ["seed 004", "L737"]),
        ("(Seed 000 Fig. 1; thesis L1298-1302, L729–753)", ["Seed 000", "L1298-1302", "L729–753"]),
        (
            "misprint resolved (spec §9 A6); psomas spec §1.8; Thesis spec §7.2",
            ["spec §", "psomas spec §", "Thesis spec §"],
        ),
        (
            "ecosystem §1.3, reference-implementations §1.2, ref-impl §4.2, spec A14",
            ["ecosystem §", "reference-implementations", "ref-impl", "spec A14"],
        ),
        ("(seed 002 line 163;", ["seed 002", "line 163"]),
        ("thesis Fig. 5.9;\n§8 E4), §8-E7", ["§8 E4", "§8-E7"]),
        ("Teh et al., ECCV 2020 (seed\n002), psomas spec\n§7.5", ["seed\n002", "psomas spec\n§"]),
        (
            f"see {NOTES.as_posix()}/spec and {NOTES_ABSOLUTE.as_posix()}/seeds",
            [NOTES.as_posix(), NOTES_ABSOLUTE.as_posix()],
        ),
    ],
)
def test_the_pattern_finds_the_old_tag_forms(text, expected):
    assert hits(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "L2-normalised embeddings, the L1 norm, L_ZS and L_XML, L_DML, ViT-L/14, ViT-L-14, resnet50.layer4",
        "a loss spec (one spec or a list of specs); the model spec ``python:cir_tiny_clip:build``",
        "Gürbüz thesis §5.3.4.1, Eq. 5.2.4; GSP paper supplement §1.5, Fig. 7; Psomas thesis Algorithm 2",
        "seed 0, split_seed 0, seeds 0 1 2, --seeds 0 1; 4 lines of output; line 12 of the log",
        "L2 reproduced; cos reproduced; an L2 or L1 penalty (L2-normalize)",
    ],
)
def test_the_pattern_leaves_ordinary_text_alone(text):
    assert hits(text) == []


def test_no_citation_points_outside_the_repository():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout ({listed.stderr.strip()})")
    found = []
    for name in listed.stdout.splitlines():
        if name in ALLOWED or name.startswith(VENDORED):
            continue
        if not name.endswith(SUFFIXES) or not (ROOT / name).is_file():
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="ignore")
        for match in FORBIDDEN.finditer(text):  # the whole text: a tag may be broken across lines
            number = text.count("\n", 0, match.start()) + 1
            found.append(
                f"{name}:{number}: {match.group(0)!r} in {text.splitlines()[number - 1].strip()[:100]}"
            )
    assert not found, (
        f"{len(found)} citations a reader cannot follow (cite the paper's section, equation, "
        "table or algorithm instead; docs/references.md lists the papers):\n" + "\n".join(found)
    )
