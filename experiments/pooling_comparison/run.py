"""Pooling alternatives on the embedded collage with C2 and ProxyNCA++ (seed 000 supplement
§1.4, Table 4; thesis §5.3.5, Fig. 5.12).

Every pooling of the zoo is trained on ``collage_digits`` from the preset ``demo-gap`` (small
CNN, 128-D local head, bf16) with the same seeds and, per loss, the same short budget, once
with the contrastive loss C2 and once with ProxyNCA++; NetVLAD and OTP use 8 clusters x 16-D
(128-D, the paper's "8x16"). Prints the 128-D MAP@R table in the layout of Table 4 (mean ± std
over seeds) next to the paper's Cifar-Collage column, and writes ``results.json`` and a bar plot.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402

#: name in the table: (pooling spec as a YAML override value, Table 4 Cifar-Collage MAP@R C2, PNCA)
POOLINGS = {
    "CBAM": ("{name: cbam}", 7.87, 10.99),
    "CroW": ("{name: crow}", 10.09, 11.48),
    "DeLF": ("{name: delf}", 11.44, 24.83),
    "GeMax": ("{name: gemax}", 7.04, 7.83),
    "GeMean": ("{name: gem}", 10.97, 10.60),
    "GSoP": ("{name: gsop}", 11.15, 17.73),
    "OTP 8x16": ("{name: otp, prototypes: 8, dim: 16}", 7.02, 11.55),
    "SOLAR": ("{name: solar}", 17.30, 20.36),
    "T-SMK": ("{name: t_smk}", 9.21, 13.15),
    "VLAD 8x16": ("{name: netvlad, clusters: 8, dim: 16}", 21.73, 19.68),
    "WELDON": ("{name: weldon}", 13.81, 20.38),
    "LSE": ("{name: lse}", None, None),
    "k-max": ("{name: kmax}", None, None),
    "SimPool": ("{name: simpool}", None, None),
    "GAP": ("{name: gap}", 8.09, 10.68),
    "GMP": ("{name: gmp}", 9.53, 11.25),
    "GMP+GAP": ("{name: gap_gmp}", 10.01, 11.85),
    "GSP": ("{name: gsp, num_prototypes: 16, mu: 0.25, eps: 10.0, iters: 100, memory_size: 1024}", 22.68, 27.61),
}
LOSSES = {
    "C2": "{name: c2, pos_margin: 0.0, neg_margin: 0.5}",
    "ProxyNCA++": "{name: proxynca_pp, lr_multiplier: 100}",
}
METRICS = ("map_at_r", "precision_at_1")
#: ProxyNCA++ stays at chance (loss ln 60) for its first ~80 steps here, so it gets a longer budget
FULL = dict(steps={"C2": 80, "ProxyNCA++": 200}, seeds=(0, 1), poolings=tuple(POOLINGS))
SMOKE = dict(steps={"C2": 2, "ProxyNCA++": 2}, seeds=(0,), poolings=("GAP", "GSP"))


def bar_plot(out: Path, table: dict) -> Path:
    from matplotlib.figure import Figure

    names = list(table)
    figure = Figure(figsize=(9.0, 3.2))
    axes = figure.add_subplot(1, 1, 1)
    for k, loss in enumerate(LOSSES):
        axes.bar([i + 0.4 * k for i in range(len(names))], [table[n][loss]["map_at_r"]["mean"] for n in names], 0.4,
                 yerr=[table[n][loss]["map_at_r"]["std"] for n in names], label=loss, capsize=2)
    axes.set_xticks([i + 0.2 for i in range(len(names))], names, rotation=60, fontsize=7)
    axes.set_ylabel("test MAP@R (%)")
    axes.legend(fontsize=7)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    path = out / "map_at_r.png"
    figure.savefig(path, dpi=80)
    return path


def paper(value) -> str:
    return "-" if value is None else f"{value:.2f}"


DATASETS = ("collage_digits", "collage_fashion")


def main(argv=None) -> dict:
    parser = common.parser("pooling_comparison", __doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=DATASETS, default="collage_digits",
                        help="the digits collage (default) or the Fashion-MNIST collage (Debian dataset-fashion-mnist)")
    args = parser.parse_args(argv)
    out = common.setup(args)
    plan = SMOKE if args.smoke else FULL
    table: dict = {}
    for name in plan["poolings"]:
        spec = POOLINGS[name][0]
        table[name] = {}
        for loss, loss_spec in LOSSES.items():
            slug = f"{name}-{loss}".lower().replace(" ", "").replace("+", "p")
            overrides = [f"model.pooling={spec}", f"loss={loss_spec}"]
            if args.dataset != "collage_digits" and not args.smoke:
                overrides.append(f"data.dataset.name={args.dataset}")
            cfg = common.config("demo-gap.yaml", overrides, steps=plan["steps"][loss], name=slug, smoke=args.smoke)
            table[name][loss] = common.summary(common.train_seeds(cfg, plan["seeds"], out, reuse=args.reuse), METRICS)
            print(f"{name:10s} {loss:10s} MAP@R {common.cell(table[name][loss], 'map_at_r')}"
                  f"  ({table[name][loss]['seconds']:.0f} s)", flush=True)
    rows = [[name, *(common.cell(table[name][loss], "map_at_r") for loss in LOSSES),
             *(paper(v) for v in POOLINGS[name][1:])] for name in table]
    header = ["pooling (128D MAP@R)", *(f"collage {loss}" for loss in LOSSES), *(f"paper Cifar Collage {loss}" for loss in LOSSES)]
    text = common.markdown_table(header, rows)
    total = sum(entry["seconds"] for losses in table.values() for entry in losses.values())
    budget = ", ".join(f"{loss} {steps} steps" for loss, steps in plan["steps"].items())
    print(f"\n{args.dataset}, {budget}, seeds {list(plan['seeds'])}, test MAP@R x100, mean ± std over seeds; "
          f"training time {total:.0f} s\n{text}")
    payload = {"plan": {**plan, "poolings": list(plan["poolings"]), "dataset": args.dataset}, "results": table, "table": text,
               "seconds": total, "plots": [str(bar_plot(out, table))]}
    common.write_json(out / "results.json", payload)
    return payload


if __name__ == "__main__":
    main()
