"""``model.init_from``: a model starts from a finished run's weights where names and shapes meet.

Cross-checks: every tensor is compared with the run's weights or with the new model's own
initialisation, name by name (a loop over the state dicts, independent of the copy); a weights
file that is a pickle is refused without running it.
"""

import pickle
from dataclasses import replace

import pytest
import torch

from gspdml.config import load_config
from gspdml.errors import ConfigError, GspdmlError
from gspdml.models import build_embedder
from gspdml.training.init_from import initialise_from_run
from gspdml.training.run_dir import WEIGHTS_FILE, save_weights

BACKBONE = {"name": "small_cnn", "widths": [4, 8]}


def model_config(**fields):
    config = load_config("demo-base", ["model.backbone.weights=null"])
    model = replace(config.model, backbone={**BACKBONE}, cache_backbone_features=False, **fields)
    return replace(config, model=model)


def finished_run(folder, **fields):
    """A run folder holding the final weights of a freshly built model (and that model)."""
    config = model_config(**fields)
    torch.manual_seed(1)
    model = build_embedder(config.model.to_dict(), in_channels=1)
    folder.mkdir(parents=True)
    save_weights(folder / WEIGHTS_FILE, model, 1, config)
    return model


def fresh(**fields):
    torch.manual_seed(2)
    return build_embedder(model_config(**fields).model.to_dict(), in_channels=1)


def test_tensors_of_the_same_name_and_shape_are_copied_the_others_keep_their_initialisation(
    tmp_path,
):
    source = finished_run(tmp_path / "run-seed3", head="global", pooling={"name": "gap"})
    model = fresh(head="local", pooling={"name": "gmp"})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    done = initialise_from_run(model, str(tmp_path / "run-seed{seed}"), seed=3)
    stored, after = source.state_dict(), model.state_dict()
    for name, tensor in after.items():
        expected = stored[name] if name in stored else before[name]
        assert torch.equal(tensor, expected), name
    assert set(done.loaded) == {n for n in after if n in stored} and done.loaded
    assert all(n.startswith("backbone.") for n in done.loaded)
    assert set(done.new) == {n for n in after if n not in stored} and done.new  # the local head
    assert set(done.unused) == {n for n in stored if n not in after}  # the global projection
    assert done.source == tmp_path / "run-seed3" / WEIGHTS_FILE
    assert "tensors loaded" in done.describe() and str(done.source) in done.describe()


def test_a_tensor_of_another_shape_is_named(tmp_path):
    finished_run(tmp_path / "run", head="global", embedding_dim=16)
    model = fresh(head="global", embedding_dim=32)
    with pytest.raises(
        ConfigError, match=r"projection.weight: \(16, 8\) in the run, \(32, 8\) here"
    ):
        initialise_from_run(model, str(tmp_path / "run"), seed=0)


def test_missing_and_unfinished_runs_and_bad_placeholders_are_named(tmp_path):
    model = fresh()
    with pytest.raises(ConfigError, match="model.init_from.*not a directory"):
        initialise_from_run(model, str(tmp_path / "nowhere"), seed=0)
    (tmp_path / "unfinished").mkdir()
    with pytest.raises(ConfigError, match="has not finished; train it first"):
        initialise_from_run(model, str(tmp_path / "unfinished"), seed=0)
    with pytest.raises(ConfigError, match=r"the only placeholder is \{seed\}"):
        initialise_from_run(model, str(tmp_path / "run-{fold}"), seed=0)


def test_a_run_that_shares_no_tensor_is_refused(tmp_path):
    finished_run(tmp_path / "run")
    other = torch.nn.Sequential(torch.nn.Linear(3, 2))
    with pytest.raises(ConfigError, match="shares no tensor name"):
        initialise_from_run(other, str(tmp_path / "run"), seed=0)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickled_weights_file_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / WEIGHTS_FILE).write_bytes(pickle.dumps({"w": _RunsCode(marker)}))
    with pytest.raises(GspdmlError):
        initialise_from_run(fresh(), str(tmp_path / "run"), seed=0)
    assert not marker.exists()


def test_the_option_is_typed_and_documented():
    config = load_config("demo-base", ["model.init_from=runs/libc/seed{seed}"])
    assert config.model.init_from == "runs/libc/seed{seed}"
    with pytest.raises(ConfigError, match="model.init_from"):
        load_config("demo-base", ["model.init_from=3"])


def test_resume_needs_only_the_run_not_the_init_from_source(tmp_path):
    """issue 39, defect 10: a run started with ``model.init_from`` resumes from its own
    checkpoint after the source run was moved (before: refused until the source was put back),
    and ends with the same results."""
    import shutil

    from gspdml.training import train
    from tests.helpers.images import folder_config, image_folder

    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    source = load_config(folder_config(root, tmp_path / "runs"))
    train(source, tmp_path / "runs" / "source")
    fields = folder_config(root, tmp_path / "runs")
    fields["model"]["init_from"] = str(tmp_path / "runs" / "source")
    fields["schedule"] = {"max_steps": 4}
    fields["evaluation"]["every"] = 2
    tuned = load_config(fields)
    first = train(tuned, tmp_path / "runs" / "tuned")
    shutil.move(tmp_path / "runs" / "source", tmp_path / "moved-away")
    resumed = train(tuned, tmp_path / "runs" / "tuned", resume=True)
    assert resumed["steps"] == first["steps"] == 4 and resumed["test"] == first["test"]
    with pytest.raises(ConfigError, match=r"model\.init_from: .*source is not a directory"):
        train(tuned, tmp_path / "runs" / "new")  # starting a run still needs the source
