"""The experiment scripts on the papers' data (``--dataset``, ``--data-root``, ``--preset``,
``--dry-run``), on CIFAR files generated in the official layout (tests/helpers/cifar_files.py)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.experiments.scripts_in_process import run_script
from tests.helpers.cifar_files import write_cifar10, write_cifar100
from tests.helpers.experiments import load_common, load_experiment

ROOT = Path(__file__).resolve().parents[2]
common = load_common()

#: script: (--dataset, the number of runs of its full plan from the script's own constants)
SCRIPTS = {
    "collage": ("collage_cifar", lambda m: len(m.FULL["methods"])),
    "gsp_mu_sweep": ("collage_cifar", lambda m: len(m.FULL["mus"])),
    "gsp_m_eps_grid": ("collage_cifar", lambda m: len(m.FULL["ms"]) * len(m.FULL["epss"])),
    "metrix_mixup": ("collage_cifar", lambda m: len(m.FULL["variants"])),
    "pooling_comparison": (
        "collage_cifar",
        lambda m: len(m.FULL["poolings"]) * len(m.FULL["losses"]),
    ),
    # the sweep and the ablation share rows, per optimiser setting: every distinct config once
    "proxynca_temperature": ("collage_cifar", lambda m: None),
    "zero_shot_attributes": ("cifar10", lambda m: len(m.DEFAULT_MODELS) * len(m.FULL["seeds"])),
    "gap_analysis": ("cifar10", lambda m: 3),  # the trained source's seeds 0, 1, 2
}
#: trains its ResNet20 from scratch (Gürbüz thesis §4.3), the others load the CIFAR-100 recipe
FROM_SCRATCH = {"gap_analysis"}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cifar")
    write_cifar10(root)
    write_cifar100(root, per_class=4)
    return root


@pytest.fixture
def stand_in_after():
    """Leave the data choice of later tests of this process as it was."""
    before = common.CHOICE
    yield
    common.CHOICE = before


def test_dry_run_lists_every_run_of_each_script_on_the_real_data_and_trains_nothing(
    data_root, tmp_path
):
    """Each script imported afresh, in this process (:mod:`tests.experiments.scripts_in_process`:
    some scripts register components when they are imported)."""
    for name, (dataset, expected) in SCRIPTS.items():
        command = ["--dry-run", "--dataset", dataset, "--data-root", str(data_root)]
        module, code, printed = run_script(name, [*command, "--out", str(tmp_path / name)])
        assert code is None, (name, printed[-2000:])
        runs = printed.split("=== would train ")[1:]
        assert len(runs) == (expected(module) or len(runs)) > 0, name
        names = [run.split(":")[0] for run in runs]
        assert len(set(names)) == len(names), name
        recipe = tmp_path / name / "resnet20-cifar100.yaml"
        for run in runs:
            config = yaml.safe_load(run.split("\n", 1)[1].split("\n\n")[0])
            assert config["data"]["dataset"]["name"] == dataset
            assert config["data"]["dataset"]["root"] == str(data_root)
            assert config["model"]["backbone"]["name"] == "resnet20"
            weights = None if name in FROM_SCRATCH else str(recipe)
            assert config["model"]["backbone"].get("weights") == weights, name
        if name not in FROM_SCRATCH:
            assert yaml.safe_load(recipe.read_text())["data"]["root"] == str(data_root)
        folders = {p.name for p in (tmp_path / name).iterdir()}
        assert folders <= {recipe.name}, (name, folders)  # nothing trained


def test_a_smoke_run_trains_on_the_generated_cifar_collage_and_publishes_nothing(
    data_root, tmp_path, monkeypatch, stand_in_after
):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))
    published = ROOT / "experiments" / "collage" / "results.json"
    before = published.read_bytes()
    collage = load_experiment("collage")
    payload = collage.main(
        [
            "--smoke",
            "--methods",
            "gsp",
            "--dataset",
            "collage_cifar",
            "--data-root",
            str(data_root),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert payload["results"]["gsp"]["map_at_r"]["values"]  # trained and tested
    config = yaml.safe_load((tmp_path / "out" / "frozen-gsp" / "seed0" / "config.yaml").read_text())
    assert config["data"]["dataset"]["name"] == "collage_cifar"
    assert config["model"]["backbone"]["name"] == "small_cnn"  # the smoke backbone of CIFAR data
    assert published.read_bytes() == before


def test_a_preset_brings_its_data_and_backbone_and_keeps_the_study_s_changes(stand_in_after):
    stand_in = common.papers_regime("demo-gsp")
    assert common.on_chosen_data(stand_in) is stand_in  # the default changes nothing
    common.CHOICE = common.DataChoice(preset="cub-fair-c2-gsp", root="/data/CUB")
    cfg = common.papers_regime("demo-gsp")
    cub = common.preset("cub-fair-c2-gsp")
    assert cfg.data.dataset == {**cub.data.dataset, "root": "/data/CUB"}
    assert cfg.data.halves == cub.data.halves and cfg.model.backbone == cub.model.backbone
    assert (cfg.loss, cfg.model.pooling, cfg.optimizer, cfg.schedule) == (
        stand_in.loss,
        stand_in.model.pooling,
        stand_in.optimizer,
        stand_in.schedule,
    )
    assert common.finetuned(cfg) is cfg  # the preset's backbone trains as the preset has it
    common.named(cfg, "probe")  # a valid config


def test_bad_combinations_are_refused(tmp_path, stand_in_after):
    collage = load_experiment("collage")
    with pytest.raises(SystemExit, match="needs --data-root"):
        collage.main(["--dry-run", "--dataset", "collage_cifar", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="goes with --dataset or --preset"):
        collage.main(["--dry-run", "--data-root", str(tmp_path), "--out", str(tmp_path)])
    with pytest.raises(SystemExit):  # argparse: the collage study needs a collage
        collage.main(["--dry-run", "--preset", "cub-fair-c2-gsp", "--out", str(tmp_path)])


def test_the_ccp_proof_of_concept_reads_mnist(tmp_path, stand_in_after):
    from gspdml.data.fashion_mnist import load_mnist
    from gspdml.errors import DataError
    from tests.data.test_data_fashion import write_idx

    rng = np.random.default_rng(0)
    # 20 images per class: the experiment's 60/10/30 % split leaves 2 per class for validation
    # (with 12, one: nothing to score, issue 39 #8)
    for part, per_class in (("train", 16), ("t10k", 4)):
        labels = np.repeat(np.arange(10), per_class)
        write_idx(
            tmp_path / f"{part}-images-idx3-ubyte.gz", rng.integers(0, 256, (len(labels), 28, 28))
        )
        write_idx(tmp_path / f"{part}-labels-idx1-ubyte.gz", labels)
    images, labels = load_mnist(str(tmp_path))
    assert (
        images.shape == (200, 28, 28)
        and labels[:160].tolist() == np.repeat(np.arange(10), 16).tolist()
    )
    with pytest.raises(DataError, match="MNIST: missing .*train-images-idx3-ubyte"):
        load_mnist(str(tmp_path / "nowhere"))
    ccp = load_experiment("ccp_proof_of_concept")
    command = [
        "--smoke",
        "--dataset",
        "mnist",
        "--data-root",
        str(tmp_path),
        "--out",
        str(tmp_path / "out"),
    ]
    assert ccp.main([*command, "--dry-run"]) == {"dry_run": True}
    data = ccp.digit_splits(0)
    assert data["train"][0].shape[1] == 784 and len(data["test"][1]) == 60  # 30 % of 20 per class
    assert len(data["val"][1]) == 20  # 2 per class: a query to score
    results = ccp.main(command)
    assert results["summary"]["ccp"] and results["per_seed"][0]["sample"]
