"""Time the README's two commands on a fresh clone of HEAD and record the result per CPU class.

    python scripts/time_readme_commands.py demo test [--emulate-avx2] [--venv .venv]

For each command (``make demo``, ``make test``) this clones the repository's HEAD into a
temporary folder, runs the command there with the given virtualenv (``VENV=...``, its install
markers taken as up to date and the clone's ``src`` first on the path: the install itself is not
timed; it depends on the network, not on the CPU) and, for the demo, an empty
weight cache (so the pre-training of the demo's backbone is timed too), and writes the wall time
into ``docs/timings.json`` under the CPU's class (:func:`gspdml.compat.hardware.cpu_class`):
one record per (command, class), replacing an older one. ``--emulate-avx2`` runs the command
with ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``, as a CPU without bf16 or AVX-512 would.
The demo's record also keeps its MAP@R per method, so the README can show that the pattern held.
``scripts/readme_tables.py`` writes the README's timing table from that file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gspdml.output_files import atomic_write_text  # noqa: E402

TIMINGS = ROOT / "docs" / "timings.json"
EMULATE_AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def machine(env: dict[str, str]) -> dict[str, str]:
    """The CPU class, model and torch threads as the command's environment sees them."""
    code = (
        "import json, torch; from gspdml.compat import hardware as h; "
        "import os; print(json.dumps({'class': h.cpu_class(), 'model': h.cpu_model(), 'threads': torch.get_num_threads(), "
        "'cores': len(os.sched_getaffinity(0)), "
        "'precision': h.auto_precision('cpu').precision}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def time_command(command: str, venv: Path | None, env: dict[str, str], commit: str | None) -> dict:
    """Clone HEAD, run ``make <command>`` in the clone, return the record. Without a virtualenv
    (``--in-place``, for a machine with python and the packages but no git or make) the demo runs
    as ``make demo`` runs it once installed, ``python -m gspdml demo``, in this tree."""
    with tempfile.TemporaryDirectory(prefix="gspdml-timing-") as folder:
        if venv is None:
            clone, args = (
                ROOT,
                [
                    sys.executable,
                    "-m",
                    "gspdml",
                    "demo",
                    "--output-dir",
                    str(Path(folder) / "runs" / "demo"),
                ],
            )
        else:
            clone = Path(folder) / "repo"
            subprocess.run(
                ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True
            )
            commit = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=clone,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            # the clone's code, the given virtualenv's packages; its install markers count as up to date
            args = [
                "make",
                *(f"--old-file={venv / marker}" for marker in (".gspdml-core", ".gspdml-test")),
                command,
                f"VENV={venv}",
            ]
        run_env = {
            **env,
            "GSPDML_CACHE": str(Path(folder) / "cache"),
            "PYTHONPATH": str(clone / "src"),
        }
        start = time.perf_counter()
        done = subprocess.run(args, cwd=clone, env=run_env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        sys.stdout.write(done.stdout[-3000:])
        sys.stderr.write(done.stderr[-3000:])
        record = {
            "command": f"make {command}",
            "seconds": round(seconds, 1),
            "exit": done.returncode,
            "commit": commit,
            "date": datetime.date.today().isoformat(),
        }
        summary = (clone if venv is not None else Path(folder)) / "runs" / "demo" / "summary.json"
        if command == "demo" and summary.is_file():
            record["map_at_r"] = {
                row["method"]: row["test"]["map_at_r"] for row in json.loads(summary.read_text())
            }
        return record


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("commands", nargs="+", choices=["demo", "test"])
    parser.add_argument(
        "--emulate-avx2",
        action="store_true",
        help="run under ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2",
    )
    parser.add_argument(
        "--venv", type=Path, default=ROOT / ".venv", help="an installed virtualenv (make install)"
    )
    parser.add_argument(
        "--in-place",
        metavar="COMMIT",
        help="no git or make here (a lent GPU machine): run the demo in "
        "this tree with this python, and record it under COMMIT",
    )
    args = parser.parse_args()
    if args.in_place and args.commands != ["demo"]:
        parser.error("--in-place times the demo only")
    env = {**os.environ, **(EMULATE_AVX2 if args.emulate_avx2 else {})}
    for name in EMULATE_AVX2 if not args.emulate_avx2 else ():
        env.pop(name, None)
    cpu = machine(env)
    records = json.loads(TIMINGS.read_text()) if TIMINGS.is_file() else []
    for command in args.commands:
        venv = None if args.in_place else args.venv.resolve()
        record = {
            **time_command(command, venv, env, args.in_place),
            "cpu_class": cpu["class"],
            "cpu": cpu["model"],
            "threads": cpu["threads"],
            "cores": cpu["cores"],
            "precision": cpu["precision"],
        }
        print(json.dumps(record), flush=True)
        records = [
            r
            for r in records
            if (r["command"], r["cpu_class"]) != (record["command"], record["cpu_class"])
        ] + [record]
        atomic_write_text(
            TIMINGS,
            json.dumps(sorted(records, key=lambda r: (r["command"], r["cpu_class"])), indent=2)
            + "\n",
        )


if __name__ == "__main__":
    main()
