"""Zero-shot attribute study in the papers' regime (GSP paper §5 / Fig. 4 and App. 2.3; thesis
§5.3.3; XML paper Fig. 4).

The paper trains on CIFAR-10 (all 10 classes) a ResNet20 pre-trained on CIFAR-100 with 8 GSP
prototypes and ProxyNCA++, with and without the zero-shot loss ``L_ZS``. Here (Fashion-MNIST as
the offline CIFAR-10; dataset ``fashion_mnist_seen_classes``, registered below):

* data: 500 images of each of the 10 classes, 70/10/20 % train/val/test, **all classes on every
  split**; train images come from the training glyph pool of the collage family (split seed 0)
  and val/test images from its validation/test pools, so the backbone never saw a val/test image;
* backbone: ResNet20 pre-trained by classification of the 100 Fashion pair-tile classes (recipe
  ``resnet20-fashion``: 28-px tiles, the input size of Fashion-MNIST; training glyph pool only),
  frozen (``--regime frozen``) or fine-tuned at a tenth of the learning rate (``--regime finetune``);
* the collage regime for everything the study leaves open (Gürbüz thesis §5.3.2): bias-free 1x1 head to
  128-D local embeddings, GSP m = 8, μ = 0.2, ε = 10, 100 iterations; ZSR λ = 0.5; Adam 1e-3,
  halve on a 5-round plateau, early stopping (6 rounds) and restore-best on validation MAP@R,
  10 classes x 4 images per batch ordered as two class-disjoint halves for every model;
* models: ``gsp`` (GSP + ProxyNCA++), ``gsp_zsr`` (+ ZSR λ = 0.5 with the default logit scale
  9.5), ``gsp_zsr_s1`` (λ = 0.5, the paper's scale 1.0), ``gsp_zsr_l01`` (λ = 0.1, scale 9.5),
  and XML's histograms (XML paper Eq. 2.4, m = 8): ``gap_xml0`` (mixing 0, prototypes untrained)
  and ``gap_xml`` (mixing 0.5); ``gsp_zsr_fast_v`` (not run by default) is a diagnostic: ZSR's
  class embeddings at 100x the LR.

Attributes of a test image: GSP's pseudo-attributes ``z = π 1 / μ`` (GSP paper Eq. 4.3) or XML's
soft prototype histogram. Class attribute = mean ``z`` of the class, class embedding = mean
embedding; the cross-class prediction (ridge on 5 classes, nearest true mean among the other 5,
L2 and cosine, 1000 splits, :func:`gspdml.analysis.zero_shot.cross_class_prediction`; chance
0.2). ``MAP_c`` = test MAP@R over all classes; ``entropy`` = entropy of the class histograms.

Usage: ``python experiments/zero_shot_attributes/run.py [--smoke] [--regime frozen|finetune]
[--models ...] [--seeds ...] [--out DIR] [--threads 1]``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import multiprocessing
import shutil
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

from gspdml.analysis.zero_shot import class_means, cross_class_prediction  # noqa: E402
from gspdml.compat.hardware import cpu_model  # noqa: E402
from gspdml.config import RunConfig, load_config, validated  # noqa: E402
from gspdml.data.arrays import ArrayDataset, pixel_statistics  # noqa: E402
from gspdml.data.base import DATASETS, DataSplits, EvalSplit  # noqa: E402
from gspdml.data.fashion_mnist import CLASS_NAMES, load_fashion_mnist  # noqa: E402
from gspdml.data.shared_collage import split_pools  # noqa: E402
from gspdml.evaluation import retrieval_metrics  # noqa: E402
from gspdml.losses.xml import soft_histogram  # noqa: E402
from gspdml.training import Trainer  # noqa: E402
from gspdml.training.callbacks import Callback  # noqa: E402
from gspdml.training.checkpoint import load_state  # noqa: E402
from gspdml.workflows.tables import markdown_table  # noqa: E402

DATASET = "fashion_mnist_seen_classes"
PUBLISHED = common.ROOT / "experiments" / "zero_shot_attributes" / "results.json"
#: the glyph pools of the pre-training recipe resnet20-fashion (its split seed and glyph split)
PRETRAIN_SPLIT_SEED, GLYPH_SPLIT = 0, (0.6, 0.2, 0.2)
PROTOTYPES, MU, EPS, LAMBDA = 8, 0.2, 10.0, 0.5
PNCA = {"name": "proxynca_pp", "lr_multiplier": 100}
GSP = {
    "name": "gsp",
    "num_prototypes": PROTOTYPES,
    "mu": MU,
    "eps": EPS,
    "iters": 100,
    "memory_size": 1024,
}


def zsr(mixing: float, logit_scale: float, class_init: str | float = "unit") -> dict:
    """ZSR around ProxyNCA++; ``class_init``: the class embeddings' initial scale (``unit``, the
    library's default, ``he_normal``, the authors' code: docs/paper-vs-code.md, or the entries'
    standard deviation)."""
    return {
        "name": "zsr",
        "base": PNCA,
        "mixing": mixing,
        "logit_scale": logit_scale,
        "class_init": class_init,
    }


def xml(mixing: float) -> dict:
    return {"name": "xml", "base": PNCA, "num_prototypes": PROTOTYPES, "mixing": mixing}


#: model: (label, pooling, loss)
MODELS = {
    "gsp": ("GSP + PNCA", GSP, PNCA),
    "gsp_zsr": ("GSP + PNCA + ZSR (λ 0.5, s 9.5, unit init = default)", GSP, zsr(LAMBDA, 9.5)),
    "gsp_zsr_he": (
        "GSP + PNCA + ZSR (λ 0.5, s 9.5, he_normal init = authors' code)",
        GSP,
        zsr(LAMBDA, 9.5, "he_normal"),
    ),
    "gsp_zsr_s1": (
        "GSP + PNCA + ZSR (λ 0.5, s 1 = paper, he_normal init)",
        GSP,
        zsr(LAMBDA, 1.0, "he_normal"),
    ),
    "gsp_zsr_l01": (
        "GSP + PNCA + ZSR (λ 0.1, s 9.5, he_normal init)",
        GSP,
        zsr(0.1, 9.5, "he_normal"),
    ),
    # λ 0 without learning rate: Adam's weight decay alone would shrink the gradient-less
    # prototypes to ~0 (uniform histograms) within a few hundred steps
    "gap_xml0": (
        "GAP + PNCA, XML prototypes at their initialisation (λ 0)",
        {"name": "gap"},
        {**xml(0.0), "lr_multiplier": 0.0},
    ),
    "gap_xml": ("GAP + PNCA + XML (λ 0.5)", {"name": "gap"}, xml(LAMBDA)),
    # a diagnostic of the collapse under the authors' init, not a default model: the class
    # embeddings at 100x the LR, as the proxies
    "gsp_zsr_fast_v": (
        "GSP + PNCA + ZSR (λ 0.5, s 9.5, he_normal init, class embeddings at 100× LR: diagnostic)",
        GSP,
        {**zsr(LAMBDA, 9.5, "he_normal"), "lr_multiplier": 100},
    ),
}
#: ``||v_y||^2`` of the class embeddings at initialisation along the scale curve (128 std^2):
#: ``gsp_zsr`` is the unit init (1) and ``gsp_zsr_he`` the authors' he_normal at this study's 10
#: classes (2 * 128 / 10); ``--scale-curve`` trains the points between and below, among them the
#: he_normal scale of the benchmarks' 100 classes (2.56)
SCALE_CURVE = {"gsp_zsr": 1.0, "gsp_zsr_he": 25.6}
for _norm2 in (0.25, 2.56, 6.4, 12.8):
    SCALE_CURVE[f"gsp_zsr_v{_norm2:g}"] = _norm2
    MODELS[f"gsp_zsr_v{_norm2:g}"] = (
        f"GSP + PNCA + ZSR (λ 0.5, s 9.5, ‖v‖² {_norm2:g} at init)",
        GSP,
        zsr(LAMBDA, 9.5, math.sqrt(_norm2 / 128)),
    )
#: the models ``--scale-curve`` trains (the named inits are in the published runs already)
SCALE_ONLY = tuple(m for m in SCALE_CURVE if m not in ("gsp_zsr", "gsp_zsr_he"))
DEFAULT_MODELS = (
    "gsp",
    "gsp_zsr",
    "gsp_zsr_he",
    "gsp_zsr_s1",
    "gsp_zsr_l01",
    "gap_xml0",
    "gap_xml",
)
ZSR_MODELS = ("gsp_zsr", "gsp_zsr_he", "gsp_zsr_s1", "gsp_zsr_l01")
BATCH = 10 * 4
#: GSP's pseudo-attributes are zero until its prototypes are initialised from the first
#: ``memory_size`` pooled samples; a model selected at or before this step never trained with L_ZS
ZSR_STARTS = -(-GSP["memory_size"] // BATCH)
BACKBONE = {"name": "resnet20", "weights": "resnet20-fashion", "frozen": True}
SMOKE_BACKBONE = {
    "name": "small_cnn",
    "widths": [8, 16],
    "weights": "smoke-small_cnn-digits",
    "frozen": True,
}
#: max steps, validation every, early-stopping patience (rounds), images per class, splits
FULL = dict(seeds=(0, 1, 2), steps=600, every=25, patience=6, images=500, repeats=1000)
SMOKE = dict(seeds=(0,), steps=4, every=2, patience=6, images=20, repeats=50)
METRICS = ("l2", "cosine", "map_c", "entropy")
#: the weights each model is measured at: the selected ones (the verdicts) and the last ones
WEIGHTS = {
    "selected": "Selected model (best validation round, restored; the verdicts use these)",
    "last": "Last weights (where early stopping or the step budget ended training)",
}
PAPER_ZSR = (
    "Fig. 4 (GSP paper) / Fig. 5.6 (thesis): cross-class prediction 'substantially superior' with L_ZS "
    "(Gürbüz thesis §6.2: > 30 points); numbers only in the figure"
)
PAPER_XML = (
    "Fig. 4 (XML paper): higher MAP_x with L_XML at similar MAP_c; numbers only in the figure"
)


@functools.lru_cache(maxsize=1)
def _fashion_mnist() -> tuple[np.ndarray, np.ndarray]:
    return load_fashion_mnist()


def split_indices(labels: np.ndarray, seed: int, images_per_class: int) -> list[np.ndarray]:
    """Train, val and test indices into the Fashion-MNIST arrays (see the dataset below)."""
    pools = split_pools(labels, GLYPH_SPLIT, PRETRAIN_SPLIT_SEED)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x25A]))
    counts = (int(0.7 * images_per_class), int(0.1 * images_per_class))
    counts += (images_per_class - sum(counts),)
    return [
        np.concatenate([rng.permutation(pool[c])[:n] for c in range(10)])
        for pool, n in zip(pools, counts)
    ]


@DATASETS.register(DATASET)
def fashion_mnist_seen_classes(seed: int = 0, images_per_class: int = 500) -> DataSplits:
    """All 10 Fashion-MNIST classes on every split: per class ``images_per_class`` images split
    70/10/20 %, train images drawn (seeded by ``seed``) from the training glyph pool of recipe
    ``resnet20-fashion`` and val/test images from the validation/test pools it never saw."""
    images, labels = _fashion_mnist()  # read once per process, shared by the runs
    parts = split_indices(labels, seed, images_per_class)
    mean, std = pixel_statistics(images[parts[0]])
    make = lambda idx: ArrayDataset(images[idx], labels[idx], mean, std, CLASS_NAMES)  # noqa: E731
    return DataSplits(
        train=make(parts[0]), val=EvalSplit(make(parts[1])), test=EvalSplit(make(parts[2]))
    )


def model_config(model: str, seed: int, regime: str, plan: dict, smoke: bool) -> RunConfig:
    """The run config of ``model`` in the backbone ``regime`` (``common.REGIMES``): the same data,
    budget and selection rule for every model."""
    _, pooling, loss = MODELS[model]
    config = load_config(
        {
            "name": f"{regime}-{model}-seed{seed}",
            "seed": seed,
            "data": {
                "dataset": {"name": DATASET, "images_per_class": plan["images"]},
                "classes_per_batch": BATCH // 4,
                "samples_per_class": 4,
                "halves": True,
            },
            "model": {
                "backbone": SMOKE_BACKBONE if smoke else BACKBONE,
                "embedding_dim": 128,
                "pooling": pooling,
                "head": "local",
                "head_bias": False,
            },  # the authors' bias-free 1x1 embedding conv; XML reads it too
            "loss": loss,
            "optimizer": {"name": "adam", "lr": 1.0e-3, "weight_decay": 1.0e-4},
            "schedule": {"max_steps": plan["steps"], "plateau": {"factor": 0.5, "patience": 5}},
            "evaluation": {
                "every": plan["every"],
                "patience": plan["patience"],
                "restore_best": True,
                "metric": "map_at_r",
            },
            "trainer": {"progress": False, "precision": plan.get("precision", "auto")},
        }
    )
    return validated(common.REGIMES[regime](common.on_chosen_data(config, smoke)))


class BestLossState(Callback):
    """Keeps the loss's state (XML's prototypes, ZSR's class embeddings, the proxies) of the best
    validation round: ``evaluation.restore_best`` restores the model's weights only."""

    def __init__(self):
        self.state = None

    def on_evaluation(self, trainer, metrics) -> None:
        if trainer.selection.best_step == trainer.step:
            self.state = copy.deepcopy(trainer.loss.state_dict())


def train_and_measure(
    config: RunConfig, out: Path, repeats: int
) -> dict[str, tuple[dict, np.ndarray]]:
    """Train ``config`` into ``out/<name>``; the study's metrics and class histograms of the
    selected model (best validation round: its weights and its loss state) and of the last one
    (where training ended, from the last checkpoint)."""
    run_dir = out / config.name
    shutil.rmtree(run_dir, ignore_errors=True)
    keeper = BestLossState()
    trainer = Trainer.from_config(config, run_dir, callbacks={"best_loss_state": keeper})
    trainer.fit()  # restores the best round's model weights
    trainer.loss.load_state_dict(keeper.state)
    selected = measure(trainer, config.seed, repeats)
    selected[0].update(steps=trainer.step, best_step=trainer.selection.best_step)
    last_state, _ = load_state(trainer.checkpoint_path)
    trainer.model.load_state_dict(last_state["model"])
    trainer.loss.load_state_dict(last_state["loss"])
    last = measure(trainer, config.seed, repeats)
    last[0].update(steps=trainer.step, best_step=trainer.step)
    return {"selected": selected, "last": last}


@torch.no_grad()
def test_attributes(trainer: Trainer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Embeddings ``[N, D]``, attribute vectors ``[N, m]`` and labels of the test images."""
    model = trainer.model.eval()
    device = next(model.parameters()).device
    dataset = trainer.data.test.query
    embeddings, attributes, labels = [], [], []
    for start in range(0, len(dataset), 256):
        items = [dataset[i] for i in range(start, min(start + 256, len(dataset)))]
        output = model(torch.stack([x for x, _ in items]).to(device))
        if output.attributes is not None:
            z = output.attributes
        else:  # XML: the soft prototype histogram of the local features (XML paper Eq. 2.4)
            z = soft_histogram(
                output.local.float(), trainer.loss.prototypes.float(), trainer.loss.eps
            )
        embeddings.append(output.embedding.float().cpu())
        attributes.append(z.float().cpu())
        labels.append(torch.tensor([y for _, y in items]))
    return torch.cat(embeddings), torch.cat(attributes), torch.cat(labels)


def histogram_entropy(z: torch.Tensor) -> float:
    """Mean entropy (nats) of the class histograms ``z`` ``[C, m]``, each normalised to sum 1."""
    p = z / z.sum(1, keepdim=True)
    return float(-(p * p.clamp_min(1e-12).log()).sum(1).mean())


def measure(trainer: Trainer, seed: int, repeats: int) -> tuple[dict, np.ndarray]:
    """The study's metrics of a trained model and its class histograms ``[10, m]``."""
    embeddings, attributes, labels = test_attributes(trainer)
    _, z = class_means(attributes, labels)
    _, e = class_means(embeddings, labels)
    row = cross_class_prediction(z, e, repeats=repeats, seed=seed)
    row["map_c"] = float(retrieval_metrics(embeddings, labels)["map_at_r"])
    row["entropy"] = histogram_entropy(z)
    return row, z.numpy()


def summarize(per_seed: dict[str, list[dict]]) -> dict:
    """Per model and metric: values, mean and sample std over seeds (:func:`common.mean_std`)."""
    out = {}
    for model, rows in per_seed.items():
        out[model] = {}
        for metric in METRICS:
            values = [r[metric] for r in rows]
            mean, std = common.mean_std(values)
            out[model][metric] = {"values": values, "mean": mean, "std": std}
        out[model]["steps"] = [f"{r['best_step']}/{r['steps']}" for r in rows]
    return out


def cell(entry: dict, metric: str) -> str:
    digits = 2 if metric == "entropy" else 3
    return f"{entry[metric]['mean']:.{digits}f} ± {entry[metric]['std']:.{digits}f}"


def zsr_loss_at_init(
    num_classes: int, logit_scale: float, class_init: str = "unit", draws: int = 5
) -> float:
    """Mean ``L_ZS`` of a freshly built ZSR (class embeddings as ``class_init`` draws them, 128-D)
    on a batch of 10 classes x 4 images in halves with random attributes ``z ~ Dirichlet(1)`` over
    8 prototypes."""
    from gspdml.losses import build_loss

    labels, values = torch.arange(BATCH // 4).repeat_interleave(4), []
    for draw in range(draws):
        torch.manual_seed(draw)
        loss = build_loss(
            zsr(LAMBDA, logit_scale, class_init), "loss", embedding_dim=128, num_classes=num_classes
        )
        z = torch.distributions.Dirichlet(torch.ones(PROTOTYPES)).sample((len(labels),))
        loss.eval()  # a measurement, not a training step: no warning about the start
        with torch.no_grad():
            values.append(float(loss.zero_shot_loss(z, labels)))
    return float(np.mean(values))


def init_loss_note() -> str:
    """One line: L_ZS at initialisation for this study's 10 classes and the benchmarks' 100,
    under both inits."""
    parts = [
        f"{c} classes, s {s:g}: unit {zsr_loss_at_init(c, s):.1f}, "
        f"he_normal {zsr_loss_at_init(c, s, 'he_normal'):.1f} (ln {c} = {np.log(c):.1f})"
        for c in (10, 100)
        for s in (9.5, 1.0)
    ]
    return "L_ZS at initialisation (random z, `zsr_loss_at_init`): " + "; ".join(parts) + "."


def summary_table(summary: dict) -> str:
    """Markdown tables, one per weights (:data:`WEIGHTS`): a row per model, mean ± std over seeds."""
    header = [
        "model",
        "cross-class NN acc. (L2)",
        "cross-class NN acc. (cosine)",
        "MAP_c",
        f"class-histogram entropy (nats; uniform {np.log(PROTOTYPES):.2f})",
        "measured step / last step, per seed",
    ]
    parts = []
    for weights, title in WEIGHTS.items():
        rows = [
            [MODELS[m][0], *(cell(entry, k) for k in METRICS), ", ".join(entry["steps"])]
            for m, entry in summary[weights].items()
        ]
        parts.append(f"{title}:\n\n{markdown_table(header, rows)}")
    return "\n\n".join([*parts, init_loss_note()])


def zsr_verdict(ours: dict, no_zsr: dict, ours_last: dict) -> str:
    """:func:`common.verdict` of a ZSR model against GSP without ZSR (L2 and cosine); *not
    reproduced* whatever the numbers when every seed selected weights from before L_ZS acted
    (step <= :data:`ZSR_STARTS`): then the selected model is no ZSR model."""
    best = [int(step.split("/")[0]) for step in ours["steps"]]
    if max(best) <= ZSR_STARTS:
        return (
            f"not reproduced (every seed selected its step-{'/'.join(map(str, best))} weights, before L_ZS acted; "
            f"trained with L_ZS, the last weights score L2 {cell(ours_last, 'l2')}, entropy {cell(ours_last, 'entropy')})"
        )
    return f"L2 {common.verdict(ours, {'no ZSR': no_zsr}, 'l2')}, cos {common.verdict(ours, {'no ZSR': no_zsr}, 'cosine')}"


def run_label(key: str, payload: dict) -> str:
    """The regime of a published run, with its budget when not the study's 600 steps, the GPU it
    trained on (the CPU runs name none) and its key in results.json, e.g. ``finetune, 1200 steps,
    NVIDIA H100 80GB HBM3 (run finetune-steps1200)``."""
    parts = [payload.get("regime", key)]
    steps = payload.get("plan", {}).get("steps", FULL["steps"])
    if steps != FULL["steps"]:
        parts.append(f"{steps} steps")
    if "NVIDIA" in payload.get("device", ""):
        parts.append(payload["device"])
    return ", ".join(parts) + ("" if key == parts[0] else f" (run {key})")


def reproduction(runs: dict) -> list[dict]:
    """README rows per regime: ZSR (each variant) against GSP without ZSR, XML against untrained
    prototypes, in cross-class NN accuracy (L2 and cosine) of the selected models by
    :func:`common.verdict`, and the last weights' in L2."""
    rows = []
    for key, payload in runs.items():
        regime = run_label(key, payload)
        s, last = payload["summary"]["selected"], payload["summary"]["last"]
        if "gsp" in s and any(m in s for m in ZSR_MODELS):
            zsrs = [m for m in ZSR_MODELS if m in s]
            ours = "; ".join(
                f"{MODELS[m][0]}: L2 {cell(s[m], 'l2')}, cos {cell(s[m], 'cosine')} (last weights: L2 {cell(last[m], 'l2')})"
                for m in ["gsp", *zsrs]
            )
            verdicts = [
                f"{MODELS[m][0].split('(')[1].rstrip(')')}: {zsr_verdict(s[m], s['gsp'], last[m])}, "
                f"last weights L2 {common.verdict(last[m], {'no ZSR': last['gsp']}, 'l2')}"
                for m in zsrs
            ]
            rows.append(
                {
                    "experiment": f"Zero-shot attributes, ZSR, ResNet20 {regime} (GSP paper Fig. 4, App. 2.3)",
                    "claim": "ZSR > no ZSR in cross-class NN accuracy of the pseudo-attributes (8 prototypes, PNCA)",
                    "paper": PAPER_ZSR,
                    "ours": ours + " (chance 0.2)",
                    "verdict": "; ".join(verdicts),
                }
            )
        scale = sorted((m for m in s if m in SCALE_CURVE), key=SCALE_CURVE.get)
        if "gsp" in s and any(m in SCALE_ONLY for m in scale):
            rows.append(scale_row(regime, s, last, scale))
        if "gap_xml" in s and "gap_xml0" in s:
            x, x0 = s["gap_xml"], s["gap_xml0"]
            rows.append(
                {
                    "experiment": f"Zero-shot attributes, XML, ResNet20 {regime} (XML paper Fig. 4)",
                    "claim": "XML-trained prototypes > prototypes at their initialisation in cross-class NN accuracy, similar MAP_c",
                    "paper": PAPER_XML,
                    "ours": f"XML: L2 {cell(x, 'l2')}, cos {cell(x, 'cosine')}, MAP_c {cell(x, 'map_c')}; "
                    f"λ 0: L2 {cell(x0, 'l2')}, cos {cell(x0, 'cosine')}, MAP_c {cell(x0, 'map_c')}",
                    "verdict": f"L2 {common.verdict(x, {'λ 0': x0}, 'l2')}; cos {common.verdict(x, {'λ 0': x0}, 'cosine')}",
                }
            )
    return rows


def scale_row(regime: str, selected: dict, last: dict, scale: list[str]) -> dict:
    """README row of a run with ``--scale-curve`` models: ZSR against GSP alone at each initial
    scale :data:`SCALE_CURVE`."""
    norms = {m: f"{SCALE_CURVE[m]:g}" for m in scale}
    ours = "; ".join(
        f"‖v‖² {norms[m]}: L2 {cell(selected[m], 'l2')} (last weights {cell(last[m], 'l2')}, "
        f"entropy {cell(last[m], 'entropy')})"
        for m in scale
    )
    return {
        "experiment": f"Zero-shot attributes, ZSR's initial scale ‖v‖² = 128 std², ResNet20 {regime} "
        "(GSP paper §4.3; docs/paper-vs-code.md)",
        "claim": "ZSR > no ZSR in cross-class NN accuracy, whatever the class embeddings' initial "
        "scale (unit init: 1; the authors' he_normal: 2.56 at 100 classes, 25.6 at this study's 10)",
        "paper": PAPER_ZSR,
        "ours": f"GSP + PNCA: L2 {cell(selected['gsp'], 'l2')} (last weights {cell(last['gsp'], 'l2')}); "
        + ours
        + " (chance 0.2)",
        "verdict": "; ".join(
            f"‖v‖² {norms[m]}: {zsr_verdict(selected[m], selected['gsp'], last[m])}, last weights "
            f"L2 {common.verdict(last[m], {'no ZSR': last['gsp']}, 'l2')}"
            for m in scale
        ),
    }


def plot_scale_curve(summary: dict, path: Path) -> None:
    """Cross-class NN accuracy (L2, mean ± std over seeds) against ``||v||^2`` at initialisation,
    selected and last weights, GSP alone as a band."""
    scale = sorted((m for m in summary["selected"] if m in SCALE_CURVE), key=SCALE_CURVE.get)
    x = [SCALE_CURVE[m] for m in scale]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for weights, marker in (("selected", "o"), ("last", "s")):
        entries = summary[weights]
        mean = [entries[m]["l2"]["mean"] for m in scale]
        std = [entries[m]["l2"]["std"] for m in scale]
        ax.errorbar(x, mean, yerr=std, marker=marker, capsize=3, label=f"ZSR, {weights} weights")
        base = entries["gsp"]["l2"]
        ax.axhspan(base["mean"] - base["std"], base["mean"] + base["std"], alpha=0.15)
        ax.axhline(base["mean"], ls="--", lw=1, label=f"GSP alone, {weights} weights")
    ax.axhline(0.2, color="grey", lw=0.8, ls=":", label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("‖v‖² of the class embeddings at initialisation (128 std²)")
    ax.set_ylabel("cross-class NN accuracy (L2)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_histograms(histograms: dict[str, dict[str, np.ndarray]], path: Path) -> None:
    """Class histograms of seed 0: a row per weights (selected, last), a column per model."""
    models = list(next(iter(histograms.values())))
    fig, axes = plt.subplots(
        len(histograms),
        len(models),
        figsize=(3.2 * len(models), 3.6 * len(histograms)),
        squeeze=False,
    )
    for r, (weights, hists) in enumerate(histograms.items()):
        for c, model in enumerate(models):
            ax, hist = axes[r, c], hists[model]
            ax.imshow(
                hist / hist.sum(1, keepdims=True), cmap="viridis", aspect="auto", vmin=0, vmax=1
            )
            ax.set_yticks(range(10), CLASS_NAMES if c == 0 else [""] * 10, fontsize=7)
            ax.set_xticks(range(hist.shape[1]))
            ax.set_xlabel("prototype", fontsize=8)
            ax.set_title(f"{model}: {weights} weights", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    plt.close(fig)


def merged(key: str, payload: dict) -> dict:
    """``payload``'s models put into the published run ``key`` (which must have the same seeds and
    budget) in place of the same models there; the table is rebuilt and the times add up."""
    stored = json.loads(PUBLISHED.read_text())["runs"][key]
    same = ("seeds", "steps", "every", "patience", "images", "repeats")
    if [stored["plan"][k] for k in same] != json.loads(
        json.dumps([payload["plan"][k] for k in same])
    ):
        raise SystemExit(f"--merge: the published run {key!r} has another plan: {stored['plan']}")
    summary = {w: {**stored["summary"][w], **payload["summary"][w]} for w in WEIGHTS}
    histograms = {
        w: {**stored["class_histograms_seed0"][w], **payload["class_histograms_seed0"][w]}
        for w in WEIGHTS
    }
    plan = {
        **stored["plan"],
        "models": list(summary["selected"]),
        "merged": stored["plan"].get("merged", []) + payload["plan"]["models"],
    }
    provenance = {k: payload[k] for k in ("device", "jobs", "threads", "seconds") if k in payload}
    return {
        **stored,
        "merges": [
            *stored.get("merges", []),
            {
                "models": payload["plan"]["models"],
                **provenance,
                "precision": payload["plan"].get("precision", "auto"),
            },
        ],
        "plan": plan,
        "summary": summary,
        "table": summary_table(summary),
        "class_histograms_seed0": histograms,
        "seconds": stored["seconds"] + payload["seconds"],
    }


def device_label() -> str:
    """Where the runs trained: the GPU's name, else the CPU model."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return cpu_model()


def build_parser():
    parser = common.parser(
        "zero_shot_attributes", __doc__.splitlines()[0], reuse=False, datasets=("cifar10",)
    )
    parser.add_argument(
        "--regime", choices=tuple(common.REGIMES), default="frozen", help="backbone regime"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=tuple(MODELS),
        default=list(DEFAULT_MODELS),
        help="models to train",
    )
    parser.add_argument(
        "--scale-curve",
        action="store_true",
        help="train ZSR at the initial scales of SCALE_CURVE beyond the named inits (instead of "
        "--models; with --merge into a run that has gsp, gsp_zsr and gsp_zsr_he)",
    )
    parser.add_argument(
        "--key", help="name of the published run in results.json (default: the regime)"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="replace only these models in the published run of this key (same plan), keeping its others",
    )
    parser.add_argument("--seeds", type=int, nargs="+", help="training seeds (default 0 1 2)")
    parser.add_argument(
        "--steps", type=int, help="max steps per run (early stopping usually ends it sooner)"
    )
    parser.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="trainer.precision of every run (auto: bf16 only where the CPU or GPU has it)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs trained at once, each in its own process (with --threads 1: one per core)",
    )
    return parser


def _start_worker(argv: list[str]) -> None:
    """A worker process of ``--jobs``: the command line's threads and data choice."""
    common.setup(build_parser().parse_args(argv))


def _train_task(task: tuple) -> tuple:
    """One (seed, model) run of the plan: its measurements and wall time."""
    seed, model, regime, plan, smoke, out = task
    began = time.time()
    config = model_config(model, seed, regime, plan, smoke)
    return seed, model, train_and_measure(config, out, plan["repeats"]), time.time() - began


def train_all(tasks: list[tuple], jobs: int, argv: list[str]):
    """Yield the results of :func:`_train_task` as the runs finish, ``jobs`` at a time (fresh
    processes, so a GPU is initialised in each)."""
    if jobs <= 1:
        yield from map(_train_task, tasks)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs, initializer=_start_worker, initargs=(argv,)) as pool:
        yield from pool.imap_unordered(_train_task, tasks)
        pool.close()
        pool.join()


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f"--jobs must be >= 1, got {args.jobs}")
    common.setup(args)
    plan = dict(SMOKE if args.smoke else FULL)
    plan.update({k: v for k, v in (("seeds", args.seeds), ("steps", args.steps)) if v})
    plan["models"] = list(SCALE_ONLY) if args.scale_curve else args.models
    plan["precision"] = args.precision
    start = time.time()
    models = plan["models"]
    if args.dry_run:
        for seed in plan["seeds"]:
            for model in models:
                config = model_config(model, seed, args.regime, plan, args.smoke)
                common.print_planned(config, [seed], args.out / "runs")
        return {"dry_run": True}
    tasks = [
        (seed, model, args.regime, plan, args.smoke, args.out / "runs")
        for seed in plan["seeds"]
        for model in models
    ]
    done = {}
    for seed, model, measured, seconds in train_all(tasks, args.jobs, argv):
        done[seed, model] = measured
        for weights, (row, _) in measured.items():
            row["seconds"] = seconds
            print(
                model, seed, weights, " ".join(f"{k}={v:.4f}" for k, v in row.items()), flush=True
            )
    per_seed = {
        w: {m: [done[seed, m][w][0] for seed in plan["seeds"]] for m in models} for w in WEIGHTS
    }
    histograms = {w: {m: done[plan["seeds"][0], m][w][1] for m in models} for w in WEIGHTS}
    summary = {w: summarize(rows) for w, rows in per_seed.items()}
    table = summary_table(summary)
    print(table, flush=True)
    plot = args.out / f"class_histograms_{args.key or args.regime}.png"
    plot_histograms(histograms, plot)
    plots = [plot]
    seconds = time.time() - start
    histograms_seed0 = {
        w: {m: h.tolist() for m, h in hists.items()} for w, hists in histograms.items()
    }
    results = {
        "smoke": args.smoke,
        "regime": args.regime,
        "plan": plan,
        "summary": summary,
        "per_seed": per_seed,
        "class_histograms_seed0": histograms_seed0,
        "table": table,
        "seconds": seconds,
    }
    common.write_json(args.out / "results.json", results)
    if not args.smoke:
        payload = {
            "plan": plan,
            "regime": args.regime,
            "summary": summary,
            "table": table,
            "seconds": seconds,
            "threads": args.threads,
            "jobs": args.jobs,
            "device": device_label(),
            "class_histograms_seed0": histograms_seed0,
        }
        key = args.key or args.regime
        if args.merge:
            payload = merged(key, payload)
            plot_histograms(
                {
                    w: {m: np.array(h) for m, h in hists.items()}
                    for w, hists in payload["class_histograms_seed0"].items()
                },
                plot,
            )
        if "gsp" in payload["summary"]["selected"] and any(
            m in SCALE_ONLY for m in payload["summary"]["selected"]
        ):
            plots.append(args.out / f"scale_curve_{key}.png")
            plot_scale_curve(payload["summary"], plots[-1])
        common.publish(
            "zero_shot_attributes", key, payload, reproduction, plots=list(map(str, plots))
        )
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
