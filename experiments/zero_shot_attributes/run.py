"""Zero-shot attribute study (seed 000 §5 / Fig. 4 and App. 2.3; seed 001 Fig. 4; spec §5.4).

Training on all 10 classes of Fashion-MNIST (the stand-in for CIFAR-10; 500 images of every
class are split 70/10/20 % into train/val/test) with a narrow small CNN (widths 16/32/64, a
7x7 map of 64-D local features after the 1x1 head), ProxyNCA++, 8 prototypes, Adam 1e-3,
120 steps of 10 classes x 4 images (sized for a shared 2-core CPU):

* ``gsp``: small CNN + 1x1 head + GSP (m = 8) with ProxyNCA++; attributes = GSP's
  pseudo-attributes ``z`` (transported mass per prototype, Eq. 4.3 of seed 000);
* ``gsp_zsr``: the same with the cross-batch zero-shot regulariser (``zsr``, lambda = 0.5,
  the CIFAR setting of spec §5.4), batches ordered as two class-disjoint halves;
* ``gap_xml0`` / ``gap_xml``: GAP + ProxyNCA++ with XML's prototype histograms (seed 001
  Eq. 2.4, m = 8) at mixing 0 (prototypes untouched by the loss: the "without L_XML" model)
  and 0.5; attributes = the soft histogram of the local features over XML's prototypes.

On the test images, the class attribute vector is the mean ``z`` of the class and the class
embedding the mean embedding. The cross-class prediction (ridge from attributes to class mean
embeddings on 5 classes, nearest true mean among the other 5 with L2 and cosine distance) is
repeated 1000 times (:func:`gspdml.analysis.zero_shot.cross_class_prediction`); chance is 0.2.
``MAP_c`` is the test MAP@R over all classes (seen-class performance, seed 001 Fig. 4).

Usage: ``python experiments/zero_shot_attributes/run.py [--smoke] [--out DIR]``.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # experiments/: common (which adds src/)
import common  # noqa: E402

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from gspdml.analysis.zero_shot import class_means, cross_class_prediction  # noqa: E402
from gspdml.config import load_config  # noqa: E402
from gspdml.data.arrays import ArrayDataset, pixel_statistics  # noqa: E402
from gspdml.data.base import DATASETS, DataSplits, EvalSplit  # noqa: E402
from gspdml.data.fashion_mnist import CLASS_NAMES, load_fashion_mnist  # noqa: E402
from gspdml.evaluation import retrieval_metrics  # noqa: E402
from gspdml.losses.xml import soft_histogram  # noqa: E402
from gspdml.training import Trainer  # noqa: E402

DATASET = "fashion_mnist_seen_classes"
PROTOTYPES = 8
MIXING = 0.5
METHODS = {
    "gsp": ({"name": "gsp", "num_prototypes": PROTOTYPES, "mu": 0.3, "eps": 10.0, "memory_size": 160},
            {"name": "proxynca_pp", "lr_multiplier": 100}),
    "gsp_zsr": ({"name": "gsp", "num_prototypes": PROTOTYPES, "mu": 0.3, "eps": 10.0, "memory_size": 160},
                {"name": "zsr", "base": {"name": "proxynca_pp", "lr_multiplier": 100}, "mixing": MIXING}),
    "gap_xml0": ({"name": "gap"}, {"name": "xml", "base": {"name": "proxynca_pp", "lr_multiplier": 100}, "num_prototypes": PROTOTYPES, "mixing": 0.0}),
    "gap_xml": ({"name": "gap"}, {"name": "xml", "base": {"name": "proxynca_pp", "lr_multiplier": 100}, "num_prototypes": PROTOTYPES, "mixing": MIXING}),
}


@functools.lru_cache(maxsize=1)
def _fashion_mnist() -> tuple[np.ndarray, np.ndarray]:
    return load_fashion_mnist()


@DATASETS.register(DATASET)
def fashion_mnist_seen_classes(seed: int = 0, images_per_class: int = 500) -> DataSplits:
    """All 10 Fashion-MNIST classes on every split: a seeded 70/10/20 % split of
    ``images_per_class`` random images of each class (the CIFAR-10 setting of the study)."""
    images, labels = _fashion_mnist()  # read once per process, shared by the runs
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x25A]))
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(labels == c))[:images_per_class]
        a, b = int(0.7 * len(idx)), int(0.8 * len(idx))
        for part, chosen in zip(parts, (idx[:a], idx[a:b], idx[b:])):
            part.append(chosen)
    train, val, test = (np.concatenate(p) for p in parts)
    mean, std = pixel_statistics(images[train])
    make = lambda idx: ArrayDataset(images[idx], labels[idx], mean, std, CLASS_NAMES)  # noqa: E731
    return DataSplits(train=make(train), val=EvalSplit(make(val)), test=EvalSplit(make(test)))


def train_method(method: str, seed: int, out: Path, steps: int, images_per_class: int) -> Trainer:
    pooling, loss = METHODS[method]
    config = load_config({
        "name": f"{method}-seed{seed}", "output_dir": str(out), "seed": seed,
        "data": {"dataset": {"name": DATASET, "images_per_class": images_per_class},
                 "classes_per_batch": 10, "samples_per_class": 4, "halves": True},
        "model": {"backbone": {"name": "small_cnn", "widths": [16, 32, 64]}, "embedding_dim": 64, "pooling": pooling,
                  "head": "local"},  # XML's histograms read the projected local features
        "loss": loss,
        "optimizer": {"name": "adam", "lr": 1.0e-3, "weight_decay": 1.0e-4},
        "schedule": {"max_steps": steps},
        "evaluation": {"every": steps, "patience": None, "restore_best": False},
        "trainer": {"progress": False},
    })
    return common.train_fresh(config, out)


@torch.no_grad()
def test_attributes(trainer: Trainer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Embeddings ``[N, D]``, attribute vectors ``[N, m]`` and labels of the test images."""
    model = trainer.model.eval()
    dataset = trainer.data.test.query
    embeddings, attributes, labels = [], [], []
    for start in range(0, len(dataset), 256):
        items = [dataset[i] for i in range(start, min(start + 256, len(dataset)))]
        output = model(torch.stack([x for x, _ in items]))
        if output.attributes is not None:
            z = output.attributes
        else:  # XML: the soft prototype histogram of the local features (seed 001 Eq. 2.4)
            z = soft_histogram(output.local.float(), trainer.loss.prototypes.float(), trainer.loss.eps)
        embeddings.append(output.embedding.float())
        attributes.append(z.float())
        labels.append(torch.tensor([y for _, y in items]))
    return torch.cat(embeddings), torch.cat(attributes), torch.cat(labels)


def plot_histograms(histograms: dict[str, np.ndarray], path: Path) -> None:
    fig, axes = plt.subplots(1, len(histograms), figsize=(4 * len(histograms), 4))
    for ax, (method, hist) in zip(np.atleast_1d(axes), histograms.items()):
        ax.imshow(hist / hist.sum(1, keepdims=True), cmap="viridis", aspect="auto")
        ax.set_yticks(range(10), CLASS_NAMES if ax is np.atleast_1d(axes)[0] else [""] * 10, fontsize=7)
        ax.set_xticks(range(hist.shape[1]))
        ax.set_xlabel("prototype")
        ax.set_title(f"{method}: class histograms", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = common.parser("zero_shot_attributes", __doc__.splitlines()[0], reuse=False, threads=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="training seeds of the full run")
    args = parser.parse_args(argv)
    common.setup(args)
    seeds, steps, images, repeats = ([0], 4, 40, 50) if args.smoke else (args.seeds, 120, 500, 1000)
    start, per_seed, histograms = time.time(), {m: [] for m in METHODS}, {}
    for seed in seeds:
        for method in METHODS:
            trainer = train_method(method, seed, args.out / "runs", steps, images)
            embeddings, attributes, labels = test_attributes(trainer)
            _, z = class_means(attributes, labels)
            _, e = class_means(embeddings, labels)
            row = cross_class_prediction(z, e, repeats=repeats, seed=seed)
            row["map_c"] = float(retrieval_metrics(embeddings, labels)["map_at_r"])
            row["attribute_entropy"] = float(-(z * z.clamp_min(1e-12).log()).sum(1).mean() / z.sum(1).mean())
            per_seed[method].append(row)
            if seed == seeds[0]:
                histograms[method] = z.numpy()
            print(method, seed, json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
    summary = {m: {k: {"mean": float(np.mean([r[k] for r in rows])), "std": float(np.std([r[k] for r in rows]))}
                   for k in rows[0]} for m, rows in per_seed.items()}
    for method, row in summary.items():
        print(method, " ".join(f"{k}={v['mean']:.4f}±{v['std']:.4f}" for k, v in row.items()), flush=True)
    plot_histograms(histograms, args.out / "class_histograms.png")
    results = {"smoke": args.smoke, "seeds": seeds, "steps": steps, "images_per_class": images, "repeats": repeats,
               "summary": summary, "per_seed": per_seed, "class_histograms_seed0": {m: h.tolist() for m, h in histograms.items()},
               "seconds": time.time() - start}
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
