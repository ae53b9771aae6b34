"""The probe protocol's features of a split without images are refused before anything is
embedded, with the message every classification accuracy gives a split without images
(:func:`gspdml.evaluation.top1.no_image_to_score`, a :class:`NoQueryToScore`) naming the split.
Before, :func:`~gspdml.workflows.reproduce.probe_run.pooled_features` reached ``torch.cat`` of
no chunk: 'torch.cat(): expected a non-empty list of Tensors'."""

import numpy as np
import pytest
import torch

from gspdml.data.imagenet import ImageSet
from gspdml.evaluation.metrics import NoQueryToScore
from gspdml.evaluation.top1 import fraction_correct
from gspdml.workflows.reproduce.probe_run import ProbeRunSettings, pooled_features
from tests.helpers.datasets import write_image


class _Pooled(torch.nn.Module):
    """A stand-in embedder: the mean colour of each image as its pooled vector."""

    def forward(self, images):
        return type("Output", (), {"pooled": images.mean(dim=(2, 3))})()


def test_an_empty_split_is_refused_naming_it_as_the_accuracies_refuse_it():
    empty = ImageSet((), np.zeros(0, dtype=np.int64))
    settings = ProbeRunSettings.parse(["resize=16", "crop=12", "device=cpu"])
    with pytest.raises(NoQueryToScore) as refused:
        pooled_features(_Pooled(), empty, settings, "ImageNet's val split")
    with pytest.raises(NoQueryToScore) as accuracy:
        fraction_correct(0, 0, "ImageNet's val split")
    assert str(refused.value) == str(accuracy.value)
    assert "ImageNet's val split has no images" in str(refused.value)


def test_a_split_with_images_gives_one_feature_per_image_in_order(tmp_path):
    paths = [tmp_path / f"{i}.png" for i in range(3)]
    for i, path in enumerate(paths):
        write_image(path, size=(20, 18), seed=i)
    images = ImageSet(tuple(map(str, paths)), np.array([2, 0, 1]))
    settings = ProbeRunSettings.parse(["resize=16", "crop=12", "device=cpu", "batch_size=2"])
    features, labels = pooled_features(_Pooled(), images, settings, "three images")
    assert features.shape == (3, 3) and labels.tolist() == [2, 0, 1]
    alone = [
        pooled_features(_Pooled(), ImageSet((str(p),), np.array([0])), settings, "one")[0]
        for p in paths
    ]
    assert torch.allclose(features, torch.cat(alone), atol=1e-6)
