"""GAP vs GSP vs GSP+ZSR on the embedded collages (seed 000 §5.1, Fig. 3b; thesis §5.3.2).

The CIFAR-Collage study of the GSP paper (Cifar-100 super-classes, ResNet20) needs data and
weights that cannot be downloaded here; its analogue is the zero-shot collage of
:mod:`gspdml.data.collage` with digit glyphs (``collage_digits``) and Fashion-MNIST items
(``collage_fashion``, 16-px tiles so both give 32x32 images). Each method is trained from the
demo configs (presets ``demo-{gap,gsp,gsp-zsr}``) with the same short budget, and the
"distilled" baseline trains GAP on the target tile alone (``grid: 1, background_tiles: 0``).
Prints MAP@R / P@1 (mean ± std over seeds), writes ``results.json``, a bar plot and the
pooling-weight maps of training and test images (Fig. 3b.2).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402

METHODS = {  # name: (config, extra overrides, description)
    "distilled": ("demo-gap.yaml", ("data.dataset.grid=1", "data.dataset.background_tiles=0"), "GAP on the target tile alone (no background)"),
    "gap": ("demo-gap.yaml", (), "global average pooling"),
    "gsp": ("demo-gsp.yaml", (), "generalized sum pooling"),
    "gsp_zsr": ("demo-gsp-zsr.yaml", (), "GSP + zero-shot regulariser"),
}
DATASETS = {
    "collage_digits": ("data.dataset.name=collage_digits",),
    "collage_fashion": ("data.dataset.name=collage_fashion", "data.dataset.tile_size=16"),
}
METRICS = ("map_at_r", "precision_at_1")
FULL = dict(steps=300, seeds=(0, 1), datasets=tuple(DATASETS), methods=tuple(METHODS))
SMOKE = dict(steps=2, seeds=(0,), datasets=("collage_digits",), methods=("distilled", "gsp"))


def weight_maps(out: Path, dataset: str, methods, columns: int = 5) -> Path:
    """Training and test images (seed 0) with the pooling weights of each weighted method."""
    import numpy as np

    from gspdml.data.base import build_data
    from gspdml.training import load_run

    rows = []
    for method in (m for m in methods if m.startswith("gsp")):
        cfg, model = load_run(out / f"{dataset}-{method}" / "seed0")
        data = build_data(cfg["data"]["dataset"], seed=int(cfg["seed"]))
        for split, items in (("train", data.train), ("test", data.test.query)):
            indices = np.random.default_rng(0).choice(len(items), size=columns, replace=False).tolist()
            rows.append((f"{method} {split}", items, indices, common.pooling_weights(model, items, indices)))
    path = out / f"weights-{dataset}.png"
    common.weight_map_figure(rows, path, f"{dataset}: GSP pooling weights, training and (unseen-class) test images")
    return path


def bar_plot(out: Path, table: dict) -> Path:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.5, 3.0))
    axes = figure.add_subplot(1, 1, 1)
    datasets = list(table)
    methods = list(next(iter(table.values())))
    width = 0.8 / len(methods)
    for m, method in enumerate(methods):
        means = [table[d][method]["map_at_r"]["mean"] for d in datasets]
        stds = [table[d][method]["map_at_r"]["std"] for d in datasets]
        axes.bar([i + m * width for i in range(len(datasets))], means, width, yerr=stds, label=method, capsize=2)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(datasets))], datasets)
    axes.set_ylabel("test MAP@R (%)")
    axes.legend(fontsize=7)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path = out / "map_at_r.png"
    figure.savefig(path, dpi=80)
    return path


def main(argv=None) -> dict:
    args = common.parser("collage", __doc__.splitlines()[0]).parse_args(argv)
    out = common.setup(args)
    plan = SMOKE if args.smoke else FULL
    table: dict = {}
    for dataset in plan["datasets"]:
        table[dataset] = {}
        for method in plan["methods"]:
            path, overrides, _ = METHODS[method]
            cfg = common.config(path, [*DATASETS[dataset], *overrides], steps=plan["steps"], name=f"{dataset}-{method}", smoke=args.smoke)
            table[dataset][method] = common.summary(common.train_seeds(cfg, plan["seeds"], out, reuse=args.reuse), METRICS)
            print(f"{dataset:16s} {method:10s} MAP@R {common.cell(table[dataset][method], 'map_at_r')}", flush=True)
    rows = [
        [dataset, method, common.cell(entry, "map_at_r"), common.cell(entry, "precision_at_1"), f"{entry['seconds']:.0f}"]
        for dataset, methods in table.items() for method, entry in methods.items()
    ]
    text = common.markdown_table(["dataset", "method", "MAP@R", "P@1", "time (s)"], rows)
    print(f"\n{plan['steps']} steps, seeds {list(plan['seeds'])}, test split, mean ± std over seeds\n{text}")
    plots = [str(bar_plot(out, table))] + [str(weight_maps(out, d, plan["methods"])) for d in plan["datasets"]]
    payload = {"plan": {**plan, "methods": list(plan["methods"])}, "results": table, "table": text, "plots": plots}
    common.write_json(out / "results.json", payload)
    return payload


if __name__ == "__main__":
    main()
