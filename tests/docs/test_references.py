"""Every source tag in the repository has its row in docs/references.md.

Docstrings and comments cite the papers with short tags (``seed 004 L1264``, ``spec §9 A6``,
``seed 000 Eq. 4.1``, ``thesis L812``) and the authors' released code (``reference-implementations
§1.2``); docs/references.md maps each to a paper, section and equation, or to a repository. A tag written in new code without its row would point nowhere a reader can follow.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "docs" / "references.md"
TAG = re.compile(
    r"(psomas spec|gurbuz spec|spec) §(\d+(?:\.\d+)*)(?:,? *([A-Z]\d+))?"
    r"|seed (00\d)((?: supplement)? ?(?:§ ?[0-9A-Z.]+|L\d+(?:[–-]L?\d+)?|Eqs?\. [0-9.–-]+|Table [0-9.–-]+|Tables [0-9.–-]+"
    r"|Fig\. [0-9a-z.]+|Alg(?:orithm)?\.? ?\d+|chapter \d+|Prop(?:osition)?\.? [0-9.]+)?(?: L\d+(?:[–-]L?\d+)?)?)"
    r"|thesis L(\d+)")
NOTE = re.compile(r"(?:reference-implementations|ecosystem) §\d+(?:\.\d+)*")
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)
SKIP = {"docs/references.md", "tests/docs/test_references.py"}


def tags_in(text: str) -> set[str]:
    return {match.group(0).strip() for pattern in (TAG, NOTE) for match in pattern.finditer(text)}


def test_tag_pattern_reads_the_tag_forms():
    text = ("as in seed 004 L1264, spec §9 A6 and seed 000 supplement §2.2; seed 000 Eq. 4.1; thesis L812; "
            "reference-implementations §1.2 and ecosystem §4.1.")
    assert tags_in(text) == {"seed 004 L1264", "spec §9 A6", "seed 000 supplement §2.2", "seed 000 Eq. 4.1", "thesis L812",
                             "reference-implementations §1.2", "ecosystem §4.1"}


def test_every_tag_has_a_row():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {listed.stderr.strip()}")
    rows = set(ROW.findall(REFERENCES.read_text(encoding="utf-8")))
    missing = {}
    for name in listed.stdout.split():
        if name in SKIP or not name.endswith((".py", ".md", ".yaml", ".c", ".toml")):
            continue
        for tag in tags_in((ROOT / name).read_text(encoding="utf-8", errors="ignore")) - rows:
            missing.setdefault(tag, []).append(name)
    assert not missing, "tags without a row in docs/references.md:\n" + "\n".join(
        f"{tag}: {', '.join(files)}" for tag, files in sorted(missing.items()))
