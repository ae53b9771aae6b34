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
from gspdml.training.checkpoint import save_state
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


@pytest.mark.parametrize(
    "template, shown",
    [
        ("run-{seed.x}", "unknown placeholder {seed.x}"),
        ("run-{seed[0]}", "unknown placeholder {seed[0]}"),
        ("run-{}", "unknown placeholder {}"),
        ("run-{seed:s}", "Unknown format code 's'"),
        ("run-{seed:{width}}", "'width'"),
        ("run-{seed", "expected '}'"),
    ],
)
def test_a_placeholder_other_than_seed_is_a_config_error(tmp_path, template, shown):
    """``{seed.x}`` and ``{seed[0]}`` escaped as a raw AttributeError / TypeError (issue 39 #15)."""
    with pytest.raises(ConfigError) as error:
        initialise_from_run(fresh(), str(tmp_path / template), seed=3)
    message = str(error.value)
    assert message.startswith("model.init_from: ") and shown in message
    assert "the only placeholder is {seed}" in message


def test_an_integer_format_of_the_seed_is_expanded(tmp_path):
    finished_run(tmp_path / "run-003")
    done = initialise_from_run(fresh(), str(tmp_path / "run-{seed:03d}"), seed=3)
    assert done.source == tmp_path / "run-003" / WEIGHTS_FILE


@pytest.mark.parametrize(
    "state, shown",
    [
        (lambda name: {name: 3}, "holds a int, not a tensor"),
        (lambda name: {name: [torch.zeros(2)]}, "holds a list, not a tensor"),
        (lambda name: [torch.zeros(2)], "it holds a list, not named tensors"),
        (lambda name: {3: torch.zeros(2)}, "entry 3 holds a Tensor"),
    ],
)
def test_weights_holding_non_tensors_are_a_config_error_naming_the_file(tmp_path, state, shown):
    """A gspdml checkpoint file whose state is not named tensors escaped as a raw
    AttributeError ('int' object has no attribute 'shape') (issue 39 #15)."""
    (tmp_path / "run").mkdir()
    path = tmp_path / "run" / WEIGHTS_FILE
    model = fresh()
    name = next(iter(model.state_dict()))  # a name the model has
    save_state(path, state(name), {"in_channels": 1, "model": {}})
    with pytest.raises(ConfigError) as error:
        initialise_from_run(model, str(tmp_path / "run"), seed=0)
    message = str(error.value)
    assert message.startswith(f"model.init_from: {path}: not a gspdml weights file (")
    assert shown in message and "give the model.safetensors of a finished gspdml run" in message
