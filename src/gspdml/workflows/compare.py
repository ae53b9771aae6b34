"""``gspdml compare RUN_OR_PROTOCOL...``: one table across methods, with paired tests against
the first (:mod:`gspdml.cli.runs`).

Each argument is one method: a protocol folder (``protocol.json``, :mod:`gspdml.workflows.protocol`:
its models), a run folder (``results.json``: one model) or a folder of run folders (a seed
sweep; a run in it that has not finished, ``config.yaml`` without ``results.json``, is refused,
never left out of the method's numbers). Every model is keyed by its (fold, seed), read from its ``config.yaml``
(``data.dataset.val_fold``, ``seed``); its metric is the one its protocol summarises per model
(the test metrics; the fair protocol's per-model 128-D test metrics, the tuning protocol's
validation metrics).

Per method and metric the table gives the columns :func:`legend` describes, the paired tests
against the first method (the baseline) by :mod:`gspdml.evaluation.paired_tests`. The fair
protocol's 512-D numbers are ensembles that share models, not units that pair, so they are not
compared here.

Written as Markdown, LaTeX (``tabular``) and CSV, with the numbers in JSON beside them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

import yaml

from gspdml.errors import ConfigError, DataError, read_json_object
from gspdml.evaluation.paired_tests import format_p, paired_comparison
from gspdml.evaluation.statistics import mean_std
from gspdml.output_files import atomic_write_text
from gspdml.settings.sections import RunConfig
from gspdml.training.run_dir import CONFIG_FILE, RESULTS_FILE
from gspdml.training.run_identity import PROTOCOL_FILE
from gspdml.workflows.tables import markdown_table, write_table

DEFAULT_METRICS = ("precision_at_1", "map_at_r")
METRIC_TITLES = {"precision_at_1": "P@1", "map_at_r": "MAP@R", "nmi": "NMI"}
#: the columns of every written form, in order
HEADER = (
    "Method",
    "Metric",
    "mean ± std (models)",
    "pairs",
    "Δ vs baseline",
    "95% CI of Δ",
    "paired t p",
    "Wilcoxon p",
)
Key = tuple[Optional[int], int]


def method_models(path: Path) -> dict[Key, dict[str, float]]:
    """{(fold, seed): metrics} of the models of one method folder (see the module doc)."""
    path = Path(path)
    if (path / PROTOCOL_FILE).is_file():
        per_model = read_json_object(path / PROTOCOL_FILE).get("per_model", {})
        return _keyed({path / name: metrics for name, metrics in per_model.items()})
    if (path / RESULTS_FILE).is_file():
        return _keyed({path: _test_metrics(path)})
    children = sorted(path.glob("*")) if path.is_dir() else []
    unfinished = [
        p for p in children if (p / CONFIG_FILE).is_file() and not (p / RESULTS_FILE).is_file()
    ]
    if unfinished:
        raise DataError(
            f"{unfinished[0]}: a run without {RESULTS_FILE} (it has not finished) among the runs "
            f"of {path}; finish it (gspdml train {unfinished[0] / CONFIG_FILE} --resume) or move "
            "it out, so that the method's numbers are over all of its runs"
        )
    runs = [p for p in children if (p / RESULTS_FILE).is_file()]
    if not runs:
        raise DataError(
            f"{path}: neither a protocol folder ({PROTOCOL_FILE}), a run folder "
            f"({RESULTS_FILE}) nor a folder of runs; give what `gspdml protocol` or "
            "`gspdml train` wrote"
        )
    return _keyed({run: _test_metrics(run) for run in runs})


def _test_metrics(run: Path) -> dict[str, float]:
    test = read_json_object(run / RESULTS_FILE).get("test")
    if not isinstance(test, dict):
        raise DataError(f"{run / RESULTS_FILE}: no 'test' metrics; the run did not finish")
    return test


def _keyed(models: Mapping[Path, Mapping[str, Any]]) -> dict[Key, dict[str, float]]:
    out: dict[Key, dict[str, float]] = {}
    for run, metrics in models.items():
        key = model_key(run)
        if key in out:
            raise DataError(f"{run}: a second model of fold {key[0]}, seed {key[1]}")
        out[key] = {m: float(v) for m, v in metrics.items() if isinstance(v, (int, float))}
    return out


def model_key(run: Path) -> Key:
    """(fold, seed) of a run folder, from its ``config.yaml``; fold None outside the fold protocols."""
    path = Path(run) / CONFIG_FILE
    try:
        config = RunConfig.from_mapping(yaml.safe_load(path.read_text(encoding="utf-8")), "")
        return (config.data.val_fold, config.seed)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; compare needs each model's config") from None
    except (yaml.YAMLError, ConfigError, TypeError, ValueError) as error:
        raise DataError(f"{path}: no seed / data.dataset.val_fold ({error})") from None


def compare_methods(
    methods: Mapping[str, Mapping[Key, Mapping[str, float]]],
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> dict[str, Any]:
    """The comparison of ``methods`` ({name: {(fold, seed): metrics}}, the first the baseline):
    ``{"baseline", "metrics", "rows": [...]}``, one row per method and metric with its summary
    and, for every method but the baseline, the paired tests on the common (fold, seed) keys."""
    if len(methods) < 1:
        raise ConfigError("methods", "nothing to compare")
    names = list(methods)
    baseline = methods[names[0]]
    rows = []
    for name in names:
        models = methods[name]
        common = sorted(set(models) & set(baseline), key=_order)
        for metric in metrics:
            values = [m[metric] for m in models.values() if metric in m]
            if not values:
                raise ConfigError("metrics", f"method {name!r} has no {metric!r} for any model")
            row: dict[str, Any] = {
                "method": name,
                "metric": metric,
                "models": len(values),
                "summary": mean_std(values),
                "pairs": None,
                "tests": None,
            }
            if name != names[0]:
                pairs = [k for k in common if metric in models[k] and metric in baseline[k]]
                if len(pairs) < 2:
                    raise ConfigError(
                        "methods",
                        f"{name!r} and {names[0]!r} share {len(pairs)} (fold, seed) models with "
                        f"{metric!r}; a paired test needs at least 2 (train them with the same "
                        "seeds and folds)",
                    )
                row["pairs"] = [list(k) for k in pairs]
                row["unpaired"] = [list(k) for k in sorted(set(models) ^ set(baseline), key=_order)]
                row["tests"] = paired_comparison(
                    [baseline[k][metric] for k in pairs], [models[k][metric] for k in pairs]
                )
            rows.append(row)
    return {"baseline": names[0], "metrics": list(metrics), "rows": rows}


def _order(key: Key) -> tuple[int, int]:
    return (-1 if key[0] is None else key[0], key[1])


def _cells(row: Mapping[str, Any]) -> list[str]:
    summary = row["summary"]
    title = METRIC_TITLES.get(row["metric"], row["metric"])
    cells = [
        row["method"],
        title,
        f"{100 * summary['mean']:.2f} ± {100 * summary['std']:.2f} ({row['models']})",
    ]
    tests = row["tests"]
    if tests is None:
        return cells + ["–", "baseline", "–", "–", "–"]
    t, w = tests["t_test"], tests["wilcoxon"]
    return cells + [
        str(t["n"]),
        f"{100 * t['mean']:+.2f}",
        f"[{100 * t['ci_low']:+.2f}, {100 * t['ci_high']:+.2f}]",
        format_p(t["p"]),
        format_p(w["p"]),
    ]


def legend(result: Mapping[str, Any]) -> str:
    """What every column of the table is."""
    return (
        f"Baseline: {result['baseline']}. mean ± std: sample std over the method's models (each "
        "trained independently; their count in brackets), in percent. Pairs: the (fold, seed) "
        "models both methods have. Δ: mean paired difference, method − baseline, in points; "
        "95% CI: paired t interval of Δ; paired t p: two-sided paired t-test; Wilcoxon p: "
        "two-sided Wilcoxon signed-rank test (zero differences dropped; not reported below 6 "
        "non-zero pairs)."
    )


def comparison_markdown(result: Mapping[str, Any]) -> str:
    body = [_cells(row) for row in result["rows"]]
    return markdown_table(HEADER, body) + "\n\n" + legend(result) + "\n"


def comparison_csv(result: Mapping[str, Any]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        ["method", "metric", "models", "mean", "std", "pairs", "diff", "ci_low", "ci_high"]
        + ["t", "t_p", "wilcoxon_statistic", "wilcoxon_p", "wilcoxon_method"]
    )
    for row in result["rows"]:
        s, tests = row["summary"], row["tests"]
        line = [row["method"], row["metric"], row["models"], s["mean"], s["std"]]
        if tests is None:
            line += [""] * 9
        else:
            t, w = tests["t_test"], tests["wilcoxon"]
            line += [t["n"], t["mean"], t["ci_low"], t["ci_high"], t["t"], t["p"]]
            line += [w["statistic"], w["p"], w["method"]]
        writer.writerow(["" if v is None else v for v in line])
    return buffer.getvalue()


#: LaTeX for the characters a cell may hold
LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "±": r"$\pm$",
    "Δ": r"$\Delta$",
    "−": "-",
    "<": r"$<$",
}


def _latex_escape(text: str) -> str:
    return "".join(LATEX.get(char, char) for char in text)


def comparison_latex(result: Mapping[str, Any]) -> str:
    lines = [r"\begin{tabular}{ll" + "r" * (len(HEADER) - 2) + "}", r"\toprule"]
    lines.append(" & ".join(_latex_escape(h) for h in HEADER) + r" \\")
    lines.append(r"\midrule")
    for row in result["rows"]:
        cells = [_latex_escape(c) for c in _cells(row)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", "% " + legend(result)]
    return "\n".join(lines) + "\n"


def write_comparison(result: Mapping[str, Any], path: str | Path) -> list[Path]:
    """``<path>.md``, ``.json``, ``.tex`` and ``.csv`` of one comparison; returns the paths."""
    md, js = write_table(path, comparison_markdown(result), result)
    tex, table_csv = md.with_suffix(".tex"), md.with_suffix(".csv")
    atomic_write_text(tex, comparison_latex(result))
    atomic_write_text(table_csv, comparison_csv(result))
    return [md, js, tex, table_csv]


def compare_folders(
    folders: Sequence[str | Path],
    names: Optional[Sequence[str]] = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> dict[str, Any]:
    """:func:`compare_methods` of method folders, named by ``names`` or the folders' names."""
    if names is not None and len(names) != len(folders):
        raise ConfigError("--names", f"{len(names)} names for {len(folders)} folders")
    labels = list(names) if names is not None else [Path(f).resolve().name for f in folders]
    if len(set(labels)) != len(labels):
        raise ConfigError("--names", f"two methods share a name in {labels}; give --names")
    result = compare_methods(
        {label: method_models(Path(f)) for label, f in zip(labels, folders)}, metrics
    )
    return {**result, "folders": {label: str(f) for label, f in zip(labels, folders)}}
