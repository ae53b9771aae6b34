"""A self-contained HTML report of a run: the classes of each split, the metrics beside the
baselines, the training curves with the step the weights come from, the per-class metrics of the
report's images (worst first), its worst queries and a sample of queries with their neighbours,
each with the pooling-weight heatmap of the query (the pooling-weight maps of the GSP paper's
Fig. 1, for the user's own images), and the config.

The split's classes come from what the run recorded (``data.json``), never from the training
images. The per-query and per-class numbers are those of the one evaluation service
(:func:`gspdml.evaluation.service.evaluate_queries`, the registered metrics).

Everything is inline (CSS, PNG data URIs, SVG), so the file can be mailed or archived alone.
Every string that comes from a file name, a label or the config is escaped with
``html.escape``. A few lines of script report images that fail to decode on the browser console.
"""

from __future__ import annotations

import html
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from gspdml.compat.hardware import Precision
from gspdml.config import RunConfig, dump_config
from gspdml.dotted_keys import dotted_keys
from gspdml.errors import ConfigError, DataError, printable
from gspdml.evaluation.baseline_rows import baseline_rows
from gspdml.evaluation.results import RetrievalResults
from gspdml.evaluation.service import EvalSpec, QueryEvaluation, evaluate_queries
from gspdml.models.inference import autocast_context, resolve_device
from gspdml.output_files import atomic_write_text, check_writable_file
from gspdml.retrieval.embedding import embed_source, require_some
from gspdml.retrieval.embedding_map import embedding_map_svg
from gspdml.retrieval.encoder import load_placed_run
from gspdml.retrieval.figures import (
    colour_bar_html,
    heatmap_overlay,
    png_data_uri,
    training_curves_svg,
)
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.report_tables import (
    SORT_SCRIPT,
    best_round,
    per_class_section,
    split_classes_section,
    weights_step,
    weights_step_note,
)
from gspdml.retrieval.sources import (
    ImageSource,
    distinct_images,
    folder_source,
    skipped_notes,
    split_source,
)
from gspdml.settings.sections import EvaluationConfig
from gspdml.training.metrics_log import MetricsLog
from gspdml.training.run_dir import METRICS_FILE, read_data_record, read_results
from gspdml.training.run_record import determinism_note, read_environment


def esc(text: str) -> str:
    """HTML-escaped :func:`~gspdml.errors.printable` text (a non-UTF-8 file name is shown with
    backslash escapes instead of failing the page's UTF-8 write)."""
    return html.escape(printable(text))


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d232a;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid #dde1e6;padding-bottom:4px}
.muted{color:#5b6570;font-size:13px} table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #dde1e6;padding:4px 10px;text-align:left} th{background:#eef1f4}
pre{background:#f0f2f5;padding:10px;font-size:12px;overflow:auto;max-height:360px}
.row{display:flex;gap:8px;align-items:flex-start;margin-bottom:12px;padding:6px;background:#fff;border:1px solid #e3e6ea}
.tile{margin:0;width:112px;text-align:center;font-size:11px;overflow-wrap:anywhere}
.tile img{width:104px;height:104px;object-fit:contain;image-rendering:pixelated;border:4px solid #c4c9cf;display:block;margin:0 auto}
.query img{border-color:#2a5db0} .heatmap img{border-color:#8a56c2}
.correct img{border-color:#1e9e4a} .wrong img{border-color:#d33a2c}
.mark{font-weight:bold} .correct .mark{color:#1e9e4a} .wrong .mark{color:#d33a2c}
.sep{width:2px;align-self:stretch;background:#dde1e6}
.sortable th{cursor:pointer} .sortable th:hover{background:#dfe4ea}
.none{width:104px;height:104px;border:4px dashed #c4c9cf;display:flex;align-items:center;justify-content:center;margin:0 auto;color:#5b6570}
svg{max-width:100%;height:auto} .colourbar{margin:0 0 12px} .colourbar img{display:block;image-rendering:auto}
"""

SCRIPT = """
window.addEventListener("load", function () {
  document.querySelectorAll("img").forEach(function (img) {
    if (!(img.complete && img.naturalWidth > 0)) console.error("gspdml report: image failed to decode: " + img.alt);
  });
});
"""


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``RUN_DIR/metrics.jsonl`` (none when the file is absent; a torn last line
    is left out with a warning, :class:`~gspdml.training.metrics_log.MetricsLog`)."""
    return MetricsLog(Path(run_dir) / METRICS_FILE).read()


def choose_queries(labels: Sequence[Optional[str]], count: int, seed: int = 0) -> list[int]:
    """``count`` item positions that visit the classes in turn (sorted class order, items of a
    class in seeded random order), so a short grid still shows many classes."""
    rng = random.Random(seed)
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault("" if label is None else label, []).append(i)
    for members in groups.values():
        rng.shuffle(members)
    order = [groups[name] for name in sorted(groups)]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < count and any(depth < len(members) for members in order):
        chosen += [members[depth] for members in order if depth < len(members)]
        depth += 1
    return chosen[:count]


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return esc(str(value))


def _baseline_table(results: dict[str, Any]) -> list[str]:
    """The test metrics beside the baselines (step-0 model, pretrained backbone), if any."""
    columns, rows = baseline_rows(results)
    if not rows:
        return []
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_format(v) if v is not None else '-'}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return [f"<h3>Test metrics beside the baselines</h3><table><tr>{head}</tr>{body}</table>"]


def _values_table(title: str, head: str, items: Sequence[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><td>{esc(k)}</td><td>{_format(v)}</td></tr>" for k, v in items)
    return f"<h3>{title}</h3><table><tr><th>{head}</th><th>value</th></tr>{body}</table>"


def _metrics_section(
    results: Optional[dict[str, Any]], rows: list[dict[str, Any]], evaluation: EvaluationConfig
) -> str:
    parts = []
    if results:
        shown = list(dotted_keys({k: v for k, v in results.items() if k != "baseline"}).items())
        parts += [_values_table("Results (results.json)", "metric", shown)]
        parts += _baseline_table(results)
    best = best_round(rows, evaluation)
    if best is not None:
        title, chosen = best
        fields = [(k, v) for k, v in dotted_keys(chosen).items() if k != "split"]
        parts.append(_values_table(esc(title), "field", fields))
    return (
        "\n".join(parts)
        or '<p class="muted">No metrics recorded (no results.json or metrics.jsonl).</p>'
    )


def _label(label: Any) -> str:
    return "(no label)" if label is None else esc(str(label))


def _tile(kind: str, image_uri: str, caption: str, alt: str) -> str:
    return f'<figure class="tile {kind}"><img src="{image_uri}" alt="{esc(alt)}"><figcaption>{caption}</figcaption></figure>'


def retrieval_grid(
    results: RetrievalResults,
    pictures: dict[int, np.ndarray],
    queries: Sequence[int],
    heatmaps: Sequence[Optional[np.ndarray]],
    notes: Optional[Sequence[str]] = None,
) -> str:
    """HTML rows, one per query of ``results``: the query, its heatmap, then its ranked
    references framed green/red/grey by ``correct``. ``pictures``: reference row -> picture;
    ``queries[q]``: the picture key of query q; ``notes[q]``: HTML under query q."""
    rows = []
    notes = notes if notes is not None else [""] * len(queries)
    for item, row, heatmap, note in zip(queries, results.rows(), heatmaps, notes):
        name = row["query"] if row["query"] is not None else f"#{item}"
        cells = [
            _tile(
                "query",
                png_data_uri(pictures[item]),
                f"query<br>{_label(row['label'])}" + (f"<br>{note}" if note else ""),
                f"query {name}",
            )
        ]
        cells.append(
            _tile("heatmap", png_data_uri(heatmap), "pooling weights", f"pooling weights {name}")
            if heatmap is not None
            else '<figure class="tile heatmap"><div class="none">none</div><figcaption>no pooling weights</figcaption></figure>'
        )
        cells.append('<div class="sep"></div>')
        for result in row["results"]:
            kind, symbol = {
                True: ("correct", "&#10003;"),
                False: ("wrong", "&#10007;"),
                None: ("unknown", "?"),
            }[result["correct"]]
            path = result["path"] if result["path"] is not None else f"#{result['index']}"
            caption = (
                f'<span class="mark">{symbol}</span> #{result["rank"]} d={result["distance"]:.3f}<br>'
                f'{_label(result["label"])}<br><span class="muted">{esc(Path(path).name)}</span>'
            )
            cells.append(
                _tile(f"result {kind}", png_data_uri(pictures[result["index"]]), caption, path)
            )
        rows.append(f'<div class="row" title="{esc(name)}">{"".join(cells)}</div>')
    return "\n".join(rows)


def _require_two(count: int, what: str) -> None:
    if count < 2:
        raise DataError(
            f"report: leave-one-out retrieval needs at least 2 images ({what}: {count}); "
            "give --images a folder with more"
        )


@torch.inference_mode()
def build_report(
    run_dir: str | Path,
    config: RunConfig,
    model: torch.nn.Module,
    source: ImageSource,
    queries: int = 8,
    k: int = 5,
    seed: int = 0,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
    progress: bool = True,
    on_error: str = "raise",
    worst: int = 8,
    where: str = "the test split",
    precision: Precision = "fp32",
) -> tuple[str, dict[str, str]]:
    """The report page, and the files left out (``{path: problem}``, ``on_error="skip"``).

    Retrieval is leave-one-out within ``source`` (``where`` names it). When every item has a
    label, the per-class metrics and the ``worst`` queries (lowest MAP@R) come from
    :func:`~gspdml.evaluation.service.evaluate_queries`. The grid shows ``queries`` items that
    visit the classes in turn (:func:`choose_queries`), each with its pooling weights
    (``EmbedderOutput.weights``, ``[H', W']``) upsampled to the image, if the pooling has them.
    The embeddings and the weights are computed on ``device`` at ``precision`` (the run's).
    """
    model = model.eval()
    _require_two(len(source.paths), "images given")  # before the embedding work
    embedded = require_some(
        embed_source(model, source, batch_size, device, progress, on_error, precision=precision),
        "report",
    )
    vectors, source = embedded.vectors, embedded.source
    _require_two(len(source.paths), "images decoded")
    index = RetrievalIndex(vectors, source.paths, source.labels)
    chosen = choose_queries(source.labels, min(queries, len(index)), seed)
    k = min(k, len(index) - 1)
    sample = index.search(
        vectors[chosen],
        k,
        [source.paths[i] for i in chosen],
        [source.labels[i] for i in chosen],
        exclude=chosen,
    )
    recall_at = config.evaluation.recall_at
    evaluation = _evaluate(vectors, source.labels, recall_at, k)
    hardest = evaluation.worst(worst) if evaluation is not None else []
    shown = set(chosen) | set(sample.indices.flatten().tolist()) | set(hardest)
    if evaluation is not None:
        shown |= set(evaluation.results.indices[hardest, :k].flatten().tolist())
    inputs = {i: source.dataset[i][0] for i in sorted(shown)}
    pictures = {i: source.to_display(image) for i, image in inputs.items()}
    shown_weights = sorted(set(chosen) | set(hardest))
    heatmaps = _heatmaps(model, inputs, pictures, shown_weights, device, precision)
    results = read_results(run_dir)
    rows = read_metrics(run_dir)
    step = weights_step(results, config.evaluation.restore_best)
    curves = training_curves_svg(rows, step)
    name = config.name or Path(run_dir).resolve().name
    pooling = config.model.pooling
    return (
        f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gspdml report: {esc(name)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>
<body>
<h1>gspdml run report: {esc(name)}</h1>
<div class="muted">{esc(str(Path(run_dir).resolve()))} &middot; pooling {esc(json.dumps(pooling))} &middot; {len(index)} images, {esc(index.metric)} distance</div>
<h2>Data: the classes of each split</h2>
{split_classes_section(read_data_record(run_dir))}
<h2>Metrics</h2>
{_metrics_section(results, rows, config.evaluation)}
<p class="muted" id="determinism">{esc(determinism_note(read_environment(run_dir)))}</p>
<h2>Training curves</h2>
{curves or '<p class="muted">No curves: metrics.jsonl is missing or has no loss / map_at_r values.</p>'}
{weights_step_note(results, step)}
<h2 id="embedding-map">Embedding map</h2>
{embedding_map_svg(torch.as_tensor(vectors).float().cpu().numpy(), source.labels, seed) or '<p class="muted">Too few images for a map.</p>'}
<h2>Per-class metrics</h2>
{_per_class(evaluation, recall_at, where)}
<h2>Worst queries</h2>
{colour_bar_html() if any(h is not None for h in heatmaps.values()) else ""}
{_worst_section(evaluation, hardest, k, source, pictures, heatmaps)}
<h2>Retrieval</h2>
<p class="muted">{len(chosen)} queries, top {k} of the other {len(index) - 1} images each (leave-one-out).
Blue frame: query; violet: its pooling weights upsampled to the image (colour = weight / largest weight, jet: blue 0 to red 1); green &#10003;: same label as the query, red &#10007;: different.</p>
<div id="grid">
{retrieval_grid(sample, pictures, chosen, [heatmaps[i] for i in chosen])}
</div>
{_skipped_section(embedded.skipped)}
<h2>Config</h2>
<pre>{esc(dump_config(config))}</pre>
<script>{SCRIPT}{SORT_SCRIPT}</script>
</body></html>
""",
        embedded.skipped,
    )


def _evaluate(
    vectors: torch.Tensor, labels: Sequence[Optional[str]], recall_at: Sequence[int], k: int
) -> Optional[QueryEvaluation]:
    """Per-query and per-class scores of the images (None when some image has no label, or no
    class has two images: nothing to score)."""
    if any(label is None for label in labels) or len(set(labels)) == len(labels):
        return None
    return evaluate_queries(
        vectors, list(labels), spec=EvalSpec(recall_at=tuple(recall_at)), min_k=k
    )


def _heatmaps(
    model: torch.nn.Module,
    inputs: dict[int, torch.Tensor],
    pictures: dict[int, np.ndarray],
    items: list[int],
    device: str | torch.device,
    precision: Precision,
) -> dict[int, Optional[np.ndarray]]:
    """The pooling-weight overlay of each of ``items`` (None for poolings without spatial weights)."""
    if not items:
        return {}
    device = torch.device(device)
    with autocast_context(precision, device):
        weights = model(torch.stack([inputs[i] for i in items]).to(device)).weights
    if weights is None or weights.dim() != 3:
        return dict.fromkeys(items)
    return {i: heatmap_overlay(pictures[i], weights[q].float()) for q, i in enumerate(items)}


def _per_class(evaluation: Optional[QueryEvaluation], recall_at: Sequence[int], where: str) -> str:
    if evaluation is None:
        return (
            f'<p class="muted">No per-class metrics: {esc(where)} has unlabelled images or no '
            "class with two images.</p>"
        )
    lone = int(evaluation.results.lone_queries.sum())
    return per_class_section(evaluation, recall_at, where, lone)


def _worst_section(
    evaluation: Optional[QueryEvaluation],
    hardest: list[int],
    k: int,
    source: ImageSource,
    pictures: dict[int, np.ndarray],
    heatmaps: dict[int, Optional[np.ndarray]],
) -> str:
    """The queries with the lowest MAP@R and their top ``k`` of the ranking they were scored on."""
    if evaluation is None:
        return '<p class="muted">No worst queries: the images cannot be scored (see above).</p>'
    if not hardest:
        return '<p class="muted">No rows of worst queries were asked for.</p>'
    ranked = replace(
        evaluation.results.select(hardest, k),
        query_paths=tuple(source.paths[i] for i in hardest),
        reference_paths=tuple(source.paths),
    )
    notes = [
        f"MAP@R {float(evaluation.scores['map_at_r'][i]):.3f}"
        + f", R-prec. {float(evaluation.scores['r_precision'][i]):.3f}"
        for i in hardest
    ]
    return (
        f'<p class="muted">The {len(hardest)} queries with the lowest MAP@R, each with its top {k} '
        "in the ranking the metrics scored (distances: squared euclidean).</p>"
        f'<div id="worst">{retrieval_grid(ranked, pictures, hardest, [heatmaps[i] for i in hardest], notes)}</div>'
    )


def _skipped_section(skipped: dict[str, str]) -> str:
    if not skipped:
        return ""
    items = "".join(f"<li>{esc(path)}: {esc(why)}</li>" for path, why in skipped.items())
    return f'<h2>Skipped files</h2><p class="muted">{len(skipped)} files could not be decoded and are not in the grid:</p><ul>{items}</ul>'


def report_run(
    run_dir: str | Path,
    out: Optional[str | Path] = None,
    images: Optional[str | Path] = None,
    split: Optional[str] = None,
    *,
    note: Callable[[str], None],
    queries: int = 8,
    worst: int = 8,
    k: int = 5,
    seed: int = 0,
    batch_size: int = 64,
    device: str = "auto",
    progress: bool = True,
    on_error: str = "raise",
) -> tuple[Path, dict[str, str]]:
    """Write the report of the run in ``run_dir`` to ``out`` (default ``RUN_DIR/report.html``)
    over the labelled folder ``images`` (each repeated image once) or the ``split`` of the run's
    dataset (default test); returns the file and the files left out, and ``note`` gets a line
    for each."""
    if images is not None and split is not None:
        raise ConfigError("--split", "give either --images or --split, not both")
    for option, value, least in (("--queries", queries, 0), ("--worst", worst, 0), ("-k", k, 1)):
        if value < least:
            raise ConfigError(option, f"must be >= {least}, got {value}")
    path = Path(out) if out else Path(run_dir) / "report.html"
    check_writable_file(path)
    run = load_placed_run(run_dir, resolve_device(device))
    config, model, transform = run.config, run.model, run.transform
    if images is not None:
        source, where = folder_source(images, transform), f"the images of {images}"
        source, repeats = distinct_images(source, str(images))
        for copy, kept in repeats:
            note(f"{printable(copy)} is the same image as {printable(kept)}; left out")
    else:
        source, where = split_source(config, split or "test"), f"the {split or 'test'} split"
    page, skipped = build_report(
        run_dir,
        config,
        model,
        source,
        queries,
        k,
        seed,
        batch_size,
        run.device,
        progress,
        on_error,
        worst,
        where,
        run.precision,
    )
    for line in skipped_notes(source, skipped):
        note(line)
    atomic_write_text(path, page)
    return path, skipped
