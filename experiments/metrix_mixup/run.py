"""Metrix: clean vs input / feature / embedding mixup on the embedded collage (seed 003 chapter 2,
Tables 2.3 and 2.5; psomas spec §1).

Every variant trains the preset ``metrix-demo`` (small CNN, 64-D, contrastive loss, 16 classes
x 2 samples, bf16 here) on ``collage_digits`` with the same budget and seeds. The wiring after
the mixing point follows the authors' code (seed 003; feature mixup mixes the last maps *before*
GAP+GMP, then the embedding layer): ``--wiring nonlinear`` (default) pools with GAP+GMP and then
projects (``model.head: global``), so that mixing maps, inputs or embeddings are different
operations; ``--wiring linear`` is the earlier GAP after a 1x1 head, under which feature mixup of
the maps equals mixup of the un-normalised embeddings.

* ``clean``: the same ``metrix`` loss with ``mix_weight: 0`` (only the clean contrastive term);
* ``input`` / ``feature`` (Metrix) / ``embedding``: ``w = 0.4``, ``alpha = 2``, random pair kind.

Besides the test retrieval metrics it reports, on the test embeddings, the alignment and
uniformity of Wang & Isola (ICML 2020): ``align = E_pos ||f(x) - f(y)||^2`` over same-class
pairs and ``uniform = log E exp(-2 ||f(x) - f(y)||^2)`` over all pairs (both lower is better);
seed 003 (L451) measures both on the test distributions to show that mixing improves them. The
positivity analysis of ``gspdml.losses.metrix_positivity`` (Eqs. 2.14-2.23) is stated for the
Multi-Similarity loss, so it is not applied to this contrastive setting.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402
import torch  # noqa: E402

from gspdml.workflows.tables import markdown_table  # noqa: E402

VARIANTS = {
    "clean": ("loss.level=embedding", "loss.mix_weight=0.0"),
    "input": ("loss.level=input",),
    "feature": ("loss.level=feature",),
    "embedding": ("loss.level=embedding",),
}
#: what follows the backbone map (the mixing point of feature mixup)
WIRINGS = {"nonlinear": ("model.pooling={name: gap_gmp}", "model.head=global"), "linear": ()}
METRICS = ("map_at_r", "precision_at_1", "recall_at_2")
FULL = dict(steps=200, seeds=(0, 1), variants=tuple(VARIANTS))
SMOKE = dict(steps=2, seeds=(0,), variants=("clean", "feature"))


def alignment_uniformity(embeddings: torch.Tensor, labels: torch.Tensor, t: float = 2.0) -> tuple[float, float]:
    """Wang & Isola's alignment (``alpha = 2``: mean squared distance of same-class pairs) and
    uniformity (``log`` mean ``exp(-t d^2)`` over all pairs ``i != j``) of L2-normalised rows."""
    e = torch.nn.functional.normalize(embeddings.double(), dim=1)
    squared = torch.cdist(e, e).pow(2)
    off_diagonal = ~torch.eye(len(e), dtype=torch.bool)
    positive = (labels[:, None] == labels[None, :]) & off_diagonal
    return float(squared[positive].mean()), float(torch.log(torch.exp(-t * squared[off_diagonal]).mean()))


def geometry(results) -> dict:
    """Alignment and uniformity of the test embeddings of each finished run."""
    from gspdml.data.base import build_data
    from gspdml.models.inference import embed
    from gspdml.training import load_run

    values = {"alignment": [], "uniformity": []}
    for result in results:
        if "test" not in result:
            continue
        cfg, model = load_run(result["run_dir"])
        test = build_data(cfg["data"]["dataset"], seed=int(cfg["seed"])).test.query
        align, uniform = alignment_uniformity(*embed(model, test))
        values["alignment"].append(align)
        values["uniformity"].append(uniform)
    return values


def plot(out: Path, table: dict) -> Path:
    """MAP@R per variant, and alignment against uniformity per run (Wang & Isola's Fig. layout)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 3.0))
    bars, scatter = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    names = list(table)
    bars.bar(names, [table[n]["map_at_r"]["mean"] for n in names], yerr=[table[n]["map_at_r"]["std"] for n in names], capsize=3)
    bars.set_ylabel("test MAP@R (%)")
    bars.grid(axis="y", alpha=0.3)
    for name in names:
        scatter.scatter(table[name]["uniformity"]["values"], table[name]["alignment"]["values"], label=name, s=20)
    scatter.set_xlabel("uniformity (lower is better)")
    scatter.set_ylabel("alignment (lower is better)")
    scatter.legend(fontsize=7)
    scatter.grid(alpha=0.3)
    figure.tight_layout()
    path = out / "metrix.png"
    figure.savefig(path, dpi=80)
    return path


def main(argv=None) -> dict:
    parser = common.parser("metrix_mixup", __doc__.splitlines()[0])
    parser.add_argument("--wiring", choices=tuple(WIRINGS), default="nonlinear", help="what follows the mixing point")
    args = parser.parse_args(argv)
    out = common.setup(args)
    plan = SMOKE if args.smoke else FULL
    table: dict = {}
    for variant in plan["variants"]:
        cfg = common.config("metrix-demo.yaml", ["trainer.precision=bf16", *WIRINGS[args.wiring], *VARIANTS[variant]], steps=plan["steps"], name=variant, smoke=args.smoke)
        results = common.train_seeds(cfg, plan["seeds"], out, reuse=args.reuse)
        entry = common.summary(results, METRICS)
        for key, values in geometry(results).items():
            mean, std = common.mean_std(values)
            entry[key] = {"values": values, "mean": mean, "std": std}
        table[variant] = entry
        print(f"{variant:10s} MAP@R {common.cell(entry, 'map_at_r')}  ({entry['seconds']:.0f} s)", flush=True)
    rows = [[variant, *(common.cell(entry, m) for m in METRICS),
             *(f"{entry[k]['mean']:.3f} ± {entry[k]['std']:.3f}" for k in ("alignment", "uniformity")), f"{entry['seconds']:.0f}"]
            for variant, entry in table.items()]
    text = markdown_table(["mixup", "MAP@R", "P@1", "R@2", "alignment", "uniformity", "time (s)"], rows)
    print(f"\ncollage_digits, {plan['steps']} steps, seeds {list(plan['seeds'])}, test split, mean ± std over seeds\n{text}")
    payload = {"plan": {**plan, "variants": list(plan["variants"]), "wiring": args.wiring}, "results": table, "table": text, "plots": [str(plot(out, table))]}
    common.write_json(out / "results.json", payload)
    return payload


if __name__ == "__main__":
    main()
