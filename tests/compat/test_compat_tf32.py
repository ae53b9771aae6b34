"""The TF32 switch of the exact engine and the GPU tests works under either TF32 API of torch
(the flags can be set without a GPU, so this runs everywhere)."""

import pytest
import torch

from gspdml.compat.tf32 import without_tf32
from gspdml.evaluation.exact_knn import _exact_cuda_matmuls

NEW_API = hasattr(torch.backends.cuda.matmul, "fp32_precision")


@pytest.fixture
def tf32_set_by_the_new_api():
    """TF32 on through ``fp32_precision``, as a library using torch >= 2.9's API leaves it."""
    if not NEW_API:
        pytest.skip("this torch has only the legacy allow_tf32 flags")
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    saved = matmul.fp32_precision, conv.fp32_precision
    matmul.fp32_precision = conv.fp32_precision = "tf32"
    yield
    matmul.fp32_precision, conv.fp32_precision = saved


@pytest.mark.usefixtures("tf32_set_by_the_new_api")
def test_the_exact_engine_switches_tf32_off_where_the_new_api_set_it():
    """Reading the legacy ``allow_tf32`` here raises torch's "mix of the legacy and new APIs" error."""
    with _exact_cuda_matmuls(torch.device("cuda")):
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
        assert torch.backends.cudnn.conv.fp32_precision == "tf32"  # convolutions untouched
        assert not torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"


@pytest.mark.usefixtures("tf32_set_by_the_new_api")
def test_convolutions_too_and_everything_is_restored_after_an_error():
    reduced = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    with pytest.raises(KeyError), without_tf32(convolutions=True):
        assert torch.backends.cudnn.conv.fp32_precision == "ieee"
        raise KeyError("inside")
    assert (
        torch.backends.cuda.matmul.fp32_precision
        == torch.backends.cudnn.conv.fp32_precision
        == "tf32"
    )
    assert torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction == reduced


def test_the_engine_leaves_the_flags_alone_on_the_cpu():
    before = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    with _exact_cuda_matmuls(torch.device("cpu")):
        assert torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction == before
