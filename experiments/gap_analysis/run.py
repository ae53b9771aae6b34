"""GAP analysis (Gürbüz thesis chapter 4, XML paper Fig. 3; Gürbüz thesis §4.3).

2-D local features are scaled into the unit ball; 48 prototypes are picked among the pooled
local features by greedy k-center and ``delta`` is their covering radius. For every image the
prototype convex combination (PCC, Eq. 4.2.6) is compared with GAP: Prop. 4.2.1 (in its
un-squared form) says ``||PCC - GAP||_2 <= delta``; the run asserts it and reports
the largest ratio. Per class, the active prototypes (those receiving more than 1 % of the
class's histogram mass; the count with any mass is reported too) and their convex hulls are
plotted, and the fraction of class pairs whose hulls overlap is reported: overlapping hulls
are GAP's weakness (Gürbüz thesis §4.3-4.4, Fig. 4.3).

Two sources of local features:

* ``synthetic``: an offline stand-in -- 16 semantic "parts" in the plane; each class
  draws its local features from 4 class parts and 3 shared background parts (foreground ratio
  ~ N(0.5, 0.1), as in the token study of Gürbüz thesis §5.3.1) plus Gaussian noise;
* ``trained``: the local features of a small CNN whose 1x1 head has 2 channels, trained with
  GAP + C2 on the Fashion-MNIST training classes (``gspdml.training.Trainer``); the analysis
  uses 64 images of each of the 10 classes (6 seen, 4 unseen). With ``--dataset cifar10
  --data-root DIR`` as the thesis: a ResNet20 on CIFAR-10 (all 10 classes on every split).

Usage: ``python experiments/gap_analysis/run.py [--smoke] [--out DIR]``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # experiments/: common (which adds src/)
import common  # noqa: E402
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from gspdml.analysis.histogram import active_prototypes, pcc_embedding  # noqa: E402
from gspdml.analysis.hulls import convex_hull_2d, overlap_fraction  # noqa: E402
from gspdml.ops.kcenter import covering_radius, greedy_k_center  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

NUM_PROTOTYPES = 48
MASS_THRESHOLD = 0.01  # a prototype is 'active' for a class above 1% of its mean histogram mass
IMAGES_PER_CLASS = 64


def synthetic_local_features(
    seed: int,
    num_classes: int = 10,
    images_per_class: int = IMAGES_PER_CLASS,
    locations: int = 64,
    parts: int = 16,
    class_parts: int = 4,
    background_parts: int = 3,
    noise: float = 0.03,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local features ``[N, locations, 2]`` and labels ``[N]`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    radius, angle = 0.8 * np.sqrt(rng.random(parts)), 2 * np.pi * rng.random(parts)
    centres = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    background = rng.choice(parts, background_parts, replace=False)
    own = [
        rng.choice(np.setdiff1d(np.arange(parts), background), class_parts, replace=False)
        for _ in range(num_classes)
    ]
    features, labels = [], []
    for c in range(num_classes):
        for _ in range(images_per_class):
            fg = int(np.clip(round(locations * rng.normal(0.5, 0.1)), 1, locations - 1))
            picks = np.concatenate([rng.choice(own[c], fg), rng.choice(background, locations - fg)])
            features.append(centres[picks] + noise * rng.normal(size=(locations, 2)))
            labels.append(c)
    return torch.tensor(np.stack(features)), torch.tensor(labels)


def trained_config(seed: int, out: Path, steps: int, images_per_class: int, smoke: bool):
    """small_cnn + 2-D head + GAP with C2 on the Fashion-MNIST training classes; with
    ``--dataset cifar10``, ResNet20 on CIFAR-10 as the thesis (§4.3; a small CNN for ``smoke``)."""
    from gspdml.config import load_config

    dataset: dict = {"name": "fashion_mnist", "images_per_class": images_per_class}
    backbone: dict = {"name": "small_cnn"}
    if common.CHOICE.dataset == "cifar10":
        real = common.REAL_DATA["cifar10"]
        dataset = {**real.dataset, **(real.smoke_dataset if smoke else {})}
        dataset.update(root=common.CHOICE.root, images_per_class=images_per_class)
        backbone = {"name": "small_cnn" if smoke else "resnet20"}
    return load_config(
        {
            "name": f"cnn2d-seed{seed}",
            "output_dir": str(out),
            "seed": seed,
            "data": {
                "dataset": dataset,
                "classes_per_batch": 6,
                "samples_per_class": 8,
            },
            "model": {
                "backbone": backbone,
                "embedding_dim": 2,
                "pooling": {"name": "gap"},
                "head": "local",
            },
            "loss": {"name": "c2", "pos_margin": 0.0, "neg_margin": 0.5},
            "optimizer": {"name": "adam", "lr": 1.0e-3, "weight_decay": 1.0e-4},
            "schedule": {"max_steps": steps},
            "evaluation": {"every": steps, "patience": None, "restore_best": False},
            "trainer": {"progress": False},
        }
    )


def trained_local_features(config, out: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Train ``config`` (:func:`trained_config`) and return the 2-D local features
    ``[N, H*W, 2]`` of ``IMAGES_PER_CLASS`` images of every class of every split (train, val,
    test), labelled by class name (class-disjoint splits: the stand-in; or the same classes)."""
    trainer = common.train_fresh(config, out)
    model = trainer.model.eval()
    generator = torch.Generator().manual_seed(int(config.seed))
    features, labels, ids = [], [], {}
    for split in (trainer.data.train, trainer.data.val.query, trainer.data.test.query):
        split_labels = torch.as_tensor(split.labels)
        for c in torch.unique(split_labels):
            class_id = ids.setdefault(split.class_names[int(c)], len(ids))
            members = torch.nonzero(split_labels == c).squeeze(1)
            chosen = members[torch.randperm(len(members), generator=generator)[:IMAGES_PER_CLASS]]
            images = torch.stack([split[int(i)][0] for i in chosen])
            with torch.no_grad():
                local = model(images).local.float()
            features.append(local.flatten(2).transpose(1, 2))
            labels.append(torch.full((len(chosen),), class_id))
    return torch.cat(features).double(), torch.cat(labels)


def analyse(
    features: torch.Tensor, labels: torch.Tensor, num_prototypes: int = NUM_PROTOTYPES
) -> dict:
    """Prototypes, covering radius, the PCC-GAP bound and active prototypes per class."""
    features = features / (features.norm(dim=-1).max() * (1 + 1e-9))  # into the unit ball (§4.3)
    pooled = features.reshape(-1, features.shape[-1])
    prototypes = pooled[greedy_k_center(pooled, num_prototypes)]
    delta = covering_radius(pooled, prototypes)
    gap, pcc = features.mean(dim=1), pcc_embedding(features, prototypes)
    distance = (pcc - gap).norm(dim=1)
    ratio = distance / delta
    if not bool((ratio <= 1 + 1e-9).all()):
        raise AssertionError(
            f"Prop. 4.2.1 violated: max ||PCC - GAP|| / delta = {float(ratio.max()):.4f}"
        )
    classes = torch.unique(labels).tolist()
    any_mass = {c: active_prototypes(features[labels == c], prototypes) for c in classes}
    active = {
        c: active_prototypes(features[labels == c], prototypes, MASS_THRESHOLD) for c in classes
    }
    hulls = [prototypes[active[c]].numpy() for c in classes]
    return {
        "prototypes": prototypes,
        "features": features,
        "gap": gap,
        "pcc": pcc,
        "active": active,
        "summary": {
            "covering_radius": delta,
            "max_ratio": float(ratio.max()),
            "mean_ratio": float(ratio.mean()),
            "max_distance": float(distance.max()),
            "active_per_class_any_mass": float(np.mean([int(a.sum()) for a in any_mass.values()])),
            "active_per_class": float(np.mean([int(a.sum()) for a in active.values()])),
            "prototypes_shared_by_2plus_classes": int(
                (torch.stack(list(active.values())).sum(0) >= 2).sum()
            ),
            "hull_overlap_fraction": overlap_fraction(hulls),
        },
    }


def plot(result: dict, labels: torch.Tensor, title: str, path: Path) -> None:
    """Left: local features, prototypes and delta-discs; middle: class hulls of active
    prototypes; right: GAP vs PCC of a few images."""
    proto, feats = result["prototypes"].numpy(), result["features"].reshape(-1, 2).numpy()
    delta = result["summary"]["covering_radius"]
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.5))
    take = np.random.default_rng(0).choice(len(feats), min(3000, len(feats)), replace=False)
    axes[0].scatter(feats[take, 0], feats[take, 1], s=1, c="0.6")
    axes[0].scatter(proto[:, 0], proto[:, 1], s=12, c="k")
    for p in proto:
        axes[0].add_patch(plt.Circle(p, delta, fill=False, lw=0.4, color="tab:red"))
    axes[0].set_title(f"{len(proto)} k-center prototypes, delta = {delta:.3f}")
    cmap = plt.get_cmap("tab10")
    for i, (c, mask) in enumerate(result["active"].items()):
        pts = proto[mask.numpy()]
        hull = pts[convex_hull_2d(pts)]
        closed = np.vstack([hull, hull[:1]])
        axes[1].fill(closed[:, 0], closed[:, 1], color=cmap(i % 10), alpha=0.15)
        axes[1].plot(closed[:, 0], closed[:, 1], color=cmap(i % 10), lw=1, label=f"class {c}")
    axes[1].scatter(proto[:, 0], proto[:, 1], s=8, c="k")
    axes[1].set_title(
        f"hulls of active prototypes (mass > {MASS_THRESHOLD:.0%}), overlap {result['summary']['hull_overlap_fraction']:.2f}",
        fontsize=9,
    )
    axes[1].legend(fontsize=6, ncol=2)
    gap, pcc, lab = result["gap"].numpy(), result["pcc"].numpy(), labels.numpy()
    for i, c in enumerate(result["active"]):
        idx = np.flatnonzero(lab == c)[:20]
        axes[2].scatter(gap[idx, 0], gap[idx, 1], s=10, color=cmap(i % 10), marker="o")
        axes[2].scatter(pcc[idx, 0], pcc[idx, 1], s=14, color=cmap(i % 10), marker="x")
    axes[2].set_title(f"GAP (o) vs PCC (x); max ratio {result['summary']['max_ratio']:.3f}")
    axes[2].set_aspect("equal")
    for ax in axes[:2]:
        ax.set_aspect("equal")
        ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, lw=0.5, ls="--", color="0.3"))
        ax.set_xlim(-1.05, 1.05)
        ax.set_ylim(-1.05, 1.05)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def aggregate(rows: list[dict]) -> dict:
    """Per quantity, ``{"mean", "std"}`` over the seeds (sample std, :func:`common.mean_std`)."""
    return {k: dict(zip(("mean", "std"), common.mean_std([r[k] for r in rows]))) for k in rows[0]}


def pm(stats: dict, digits: int = 3) -> str:
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def summary_table(sources: dict) -> str:
    """Markdown table of the per-source means ± stds over the seeds."""
    rows = []
    for source, entry in sources.items():
        s = entry["summary"]
        rows.append(
            [
                source,
                pm(s["covering_radius"]),
                pm(s["max_ratio"]),
                pm(s["mean_ratio"]),
                pm(s["max_distance"]),
                f"{pm(s['active_per_class'], 1)} / {pm(s['active_per_class_any_mass'], 1)}",
                f"{pm(s['prototypes_shared_by_2plus_classes'], 1)} of {NUM_PROTOTYPES}",
                pm(s["hull_overlap_fraction"], 2),
            ]
        )
    return markdown_table(
        [
            "features",
            "δ (covering radius)",
            "max ‖PCC−GAP‖/δ",
            "mean ratio",
            "max ‖PCC−GAP‖",
            "active prototypes / class (>1 % / any)",
            "prototypes active in ≥ 2 classes",
            "class-hull pairs overlapping",
        ],
        rows,
    )


def holds_everywhere(flags: dict[str, bool]) -> str:
    """*reproduced* when the claim holds on every seed of every source, *partly* when on some
    sources only, *not reproduced* otherwise."""
    held = [source for source, ok in flags.items() if ok]
    if len(held) == len(flags):
        return "reproduced"
    return f"partly (holds for {', '.join(held)} only)" if held else "not reproduced"


def reproduction(runs: dict) -> list[dict]:
    """README rows: Prop. 4.2.1's bound, and the overlapping class hulls (thesis Fig. 4.1-4.3)."""
    rows = []
    for key, payload in runs.items():
        sources = payload["sources"]
        bound = {
            name: all(r["max_ratio"] <= 1.0 for r in e["per_seed"]) for name, e in sources.items()
        }
        overlap = {
            name: all(
                r["hull_overlap_fraction"] > 0 and r["prototypes_shared_by_2plus_classes"] > 0
                for r in e["per_seed"]
            )
            for name, e in sources.items()
        }
        rows.append(
            {
                "experiment": f"GAP analysis, {key} (Gürbüz thesis Prop. 4.2.1, Fig. 4.1)",
                "claim": "every GAP embedding lies within the covering radius δ of its prototype convex combination",
                "paper": "the bound for every image; δ = 0.057 (CIFAR-10, ResNet20, 48 prototypes)",
                "ours": "; ".join(
                    f"{name}: δ = {pm(e['summary']['covering_radius'])}, max ‖PCC − GAP‖/δ = "
                    f"{pm(e['summary']['max_ratio'])}"
                    for name, e in sources.items()
                ),
                "verdict": holds_everywhere(bound),
            }
        )
        rows.append(
            {
                "experiment": f"GAP analysis, {key} (Gürbüz thesis Fig. 4.3)",
                "claim": "class convex hulls of active prototypes overlap (shared prototypes)",
                "paper": "overlapping class hulls (Fig. 4.3; no numbers)",
                "ours": "; ".join(
                    f"{name}: overlapping hull pairs {pm(e['summary']['hull_overlap_fraction'], 2)}, prototypes "
                    f"active in ≥ 2 classes {pm(e['summary']['prototypes_shared_by_2plus_classes'], 1)} of "
                    f"{NUM_PROTOTYPES}"
                    for name, e in sources.items()
                ),
                "verdict": holds_everywhere(overlap),
            }
        )
    return rows


def main(argv=None) -> dict:
    args = common.parser(
        "gap_analysis", __doc__.splitlines()[0], reuse=False, datasets=("cifar10",)
    ).parse_args(argv)
    common.setup(args)
    seeds = [0] if args.smoke else [0, 1, 2]
    results: dict = {
        "smoke": args.smoke,
        "plan": {"seeds": seeds},
        "num_prototypes": NUM_PROTOTYPES,
        "sources": {},
    }
    for source in ("trained",) if args.dry_run else ("synthetic", "trained"):
        start, rows = time.time(), []
        for seed in seeds:
            if source == "synthetic":
                features, labels = synthetic_local_features(
                    seed, images_per_class=16 if args.smoke else IMAGES_PER_CLASS
                )
            else:
                config = trained_config(
                    seed,
                    args.out / "runs",
                    steps=5 if args.smoke else 300,
                    images_per_class=(8 if common.CHOICE.dataset else 80) if args.smoke else 400,
                    smoke=args.smoke,
                )
                if args.dry_run:
                    common.print_planned(config, [seed], args.out / "runs")
                    continue
                features, labels = trained_local_features(config, args.out / "runs")
            result = analyse(features, labels)
            rows.append(result["summary"])
            if seed == seeds[0]:
                plot(
                    result,
                    labels,
                    f"GAP analysis, {source} 2-D local features (seed {seed})",
                    args.out / f"{source}.png",
                )
            print(
                source,
                seed,
                json.dumps({k: round(v, 4) for k, v in result["summary"].items()}),
                flush=True,
            )
        if args.dry_run:
            continue
        results["sources"][source] = {
            "per_seed": rows,
            "summary": aggregate(rows),
            "seconds": time.time() - start,
        }
    if args.dry_run:
        return {"dry_run": True}
    results.update(
        table=summary_table(results["sources"]),
        threads=args.threads,
        seconds=sum(entry["seconds"] for entry in results["sources"].values()),
    )
    print(results["table"])
    common.write_json(args.out / "results.json", results)
    if not args.smoke:
        common.publish(
            "gap_analysis",
            "2-D local features",
            {k: results[k] for k in ("plan", "sources", "table", "seconds", "threads")},
            reproduction,
            plots=[str(args.out / f"{source}.png") for source in results["sources"]],
        )
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
