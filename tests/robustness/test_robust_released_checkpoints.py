"""Released and user checkpoints (``.pth``) are read within bounded memory, and a crafted one is
a clear error (issue 39, defects 9 and 18).

Before, a 2 MB zip bomb was inflated by ``torch.load`` (peak memory +1 GiB for the 1 GiB bomb
here) before anything looked at it; a 650-byte file whose tensor is a stride-0 view of one
number claiming 51.5 GB loaded, and the first reshape failed with a raw ``RuntimeError``; a
checkpoint with an int key failed with ``AttributeError`` and a 1-D ``pos_embed`` with
``IndexError``. Now :func:`gspdml.models.checkpoint_limits.check_torch_checkpoint` reads the
zip's directory and the pickle's declarations (building nothing) before ``torch.load``, and the
loaders check keys and the ViT's tensor shapes.
"""

import json

import pytest
import torch

from gspdml.errors import DataError
from gspdml.models.pretrained import read_state_dict
from gspdml.models.simpool_release import released_embedder, released_state_dict
from tests.helpers.crafted_checkpoints import Storage, Tensor, write_checkpoint
from tests.robustness.faults import run_python

#: a float32 tensor of 51.5 GB (12,884,901,888 elements)
HUGE = 3 * 2**32

_PEAK = """
import json, resource
from gspdml.errors import DataError
from gspdml.models.pretrained import read_state_dict
peaks = {{}}
for name, path in {paths!r}.items():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        read_state_dict(path)
        outcome = "loaded"
    except DataError as error:
        outcome = str(error)
    peaks[name] = (outcome, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
print(json.dumps(peaks))
"""


@pytest.mark.slow
def test_hostile_checkpoints_are_refused_within_bounded_memory(tmp_path):
    bomb = Tensor(Storage("0", 2**28, inflated=2**30), (2**28,), (1,))  # 1 GiB of zeros
    paths = {
        "bomb": write_checkpoint(tmp_path / "bomb.pth", {"weight": bomb}),
        "declared": write_checkpoint(
            tmp_path / "declared.pth",
            {"weight": Tensor(Storage("0", HUGE, bytes(4)), (HUGE,), (1,))},
        ),
        "stride0": write_checkpoint(
            tmp_path / "stride0.pth",
            {"weight": Tensor(Storage("0", 1, bytes(4)), (3, 2**32), (0, 0))},
        ),
    }
    assert paths["bomb"].stat().st_size < 2 * 2**20 and paths["stride0"].stat().st_size < 2500
    done = run_python(_PEAK.format(paths={k: str(v) for k, v in paths.items()}))
    assert done.returncode == 0, done.stderr
    peaks = json.loads(done.stdout)
    for name, (outcome, megabytes) in peaks.items():
        assert outcome.startswith(f"{paths[name]}: "), (name, outcome)
        assert "refused before reading it" in outcome, (name, outcome)
        assert megabytes < 500, (name, megabytes)  # the bomb alone inflated to 1 GiB before
    assert "inflate to 1073742" in peaks["bomb"][0]
    assert "declares 12884901888 elements" in peaks["declared"][0]
    assert "claims 12884901888 elements (51539607552 bytes)" in peaks["stride0"][0]


def test_a_stride0_view_claiming_51_gb_is_refused_by_the_release_loader(tmp_path):
    path = write_checkpoint(
        tmp_path / "beta.pth",
        {"simpool.beta": Tensor(Storage("0", 1, bytes(4)), (3, 2**32), (0, 0))},
    )
    with pytest.raises(DataError, match=r"beta\.pth: a tensor of shape \[3, 4294967296\]"):
        released_state_dict(path)


def test_an_honest_view_and_the_legacy_format_still_load(tmp_path):
    state = {"a": torch.arange(12.0).reshape(3, 4)[1], "b": torch.ones(2, dtype=torch.int64)}
    torch.save(state, tmp_path / "zip.pth")
    torch.save(state, tmp_path / "legacy.pth", _use_new_zipfile_serialization=False)
    for name in ("zip.pth", "legacy.pth"):
        loaded = read_state_dict(tmp_path / name)
        assert torch.equal(loaded["a"], state["a"]) and torch.equal(loaded["b"], state["b"])


def test_a_checkpoint_with_an_int_key_is_named(tmp_path):
    torch.save(
        {"teacher": {0: torch.zeros(2), "backbone.fc.weight": torch.zeros(2)}}, tmp_path / "k.pth"
    )
    with pytest.raises(
        DataError, match=r"k\.pth: expected a mapping of parameter names \(strings\) .*'0' is a int"
    ):
        released_embedder(tmp_path / "k.pth", "gap")


@pytest.mark.parametrize(
    "key, shape, message",
    [
        (
            "pos_embed",
            (10,),
            r"pos_embed has shape \[10\]; this ViT's \(8 channels\) is \[1, positions, width\]",
        ),
        (
            "pos_embed",
            (1, 5, 8),
            "4 position embeddings are not a square grid|5 position embeddings",
        ),
        ("cls_token", (8,), r"cls_token has shape \[8\]"),
        ("patch_embed.proj.weight", (8, 3, 4), r"patch_embed\.proj\.weight has shape \[8, 3, 4\]"),
    ],
)
def test_a_vit_checkpoint_with_a_malformed_tensor_is_named(tmp_path, key, shape, message):
    state = {
        "patch_embed.proj.weight": torch.zeros(8, 3, 4, 4),
        "pos_embed": torch.zeros(1, 5, 8),
        "cls_token": torch.zeros(1, 1, 8),
    }
    state[key] = torch.zeros(shape)
    if key == "pos_embed" and shape == (1, 5, 8):
        state.pop("cls_token")  # 5 positions without a [CLS] token: not a square grid
    torch.save(state, tmp_path / "vit.pth")
    with pytest.raises(DataError, match=message):
        released_embedder(tmp_path / "vit.pth", "simpool", backbone="vit")
