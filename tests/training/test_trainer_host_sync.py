"""The training step never waits for the device: the loss and the non-finite check are read at
log intervals (and before evaluations and checkpoints) only; each training record carries the
interval's step time and data wait. Also the layout, worker and compile choices of the step."""

import math

import pytest
import torch

from gspdml.config import load_config
from gspdml.models import inference
from gspdml.models.inference import loader_options, memory_format, resolve_num_workers
from gspdml.training import Trainer, step_timing
from gspdml.training.faults import FaultRecord
from gspdml.training.step_timing import StepTimer

#: the ways a tensor's value reaches the host (each waits for the device on a GPU)
HOST_READS = ("item", "__float__", "__int__", "__bool__", "tolist", "numpy", "cpu")


def _count_host_reads(trainer, monkeypatch):
    """Patch the host reads of tensors to count those made inside ``trainer._train_step``; the
    optimiser's step counters are host tensors by torch's design and are not counted."""
    inside, counted = [False], {"in_step": [], "outside": 0}

    def is_step_counter(tensor):
        return any(tensor is state.get("step") for state in trainer.optimizer.state.values())

    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def counting(self, *args, _original=original, _name=name, **kwargs):
            if inside[0] and not is_step_counter(self):
                counted["in_step"].append(_name)
            elif not inside[0]:
                counted["outside"] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counting)
    step = trainer._train_step

    def watched(*args):
        inside[0] = True
        try:
            return step(*args)
        finally:
            inside[0] = False

    monkeypatch.setattr(trainer, "_train_step", watched)
    return counted


@pytest.mark.slow
def test_a_training_step_reads_nothing_from_the_device(make_config, tmp_path, monkeypatch):
    config = load_config(
        make_config(
            schedule={"max_steps": 12},
            evaluation={"every": 12, "patience": None},
            trainer={"progress": False, "log_every": 4},
        )
    )
    trainer = Trainer.from_config(config, tmp_path / "run")
    counted = _count_host_reads(trainer, monkeypatch)
    results = trainer.fit()
    assert results["steps"] == 12 and counted["outside"] > 0
    assert counted["in_step"] == []
    train = [r for r in trainer.log.read() if r.get("split") == "train"]
    assert [r["step"] for r in train] == [4, 8, 12]
    assert all(math.isfinite(r["loss"]) and "data_wait" not in r for r in train)
    timing = trainer.timing_log.read()  # apart: metrics.jsonl stays the same on a resume
    assert [r["step"] for r in timing] == [4, 8, 12]
    for record in timing:
        assert 0.0 <= record["data_wait"] <= 1.0
        assert 0.0 <= record["data_wait_seconds"] <= record["seconds_per_step"]


def test_the_first_non_finite_step_is_recorded_on_the_device_and_named():
    fault = FaultRecord(torch.device("cpu"))
    finite, broken = torch.tensor(True), torch.tensor(False)
    fault.note(1, torch.tensor(0.5), finite)
    assert fault.read() is None
    fault.note(2, torch.tensor(float("inf")), finite)
    fault.note(3, torch.tensor(float("nan")), broken)
    assert fault.read() == "non-finite loss (inf) at step 2"
    other = FaultRecord(torch.device("cpu"))
    other.note(4, torch.tensor(0.25), broken)
    assert other.read() == "non-finite embeddings (loss 0.25) at step 4"


def test_the_step_timer_splits_wall_time_into_data_wait_and_the_rest(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(step_timing.time, "perf_counter", lambda: clock[0])

    def loader():
        for batch in range(3):
            clock[0] += 2.0  # the batch is waited for
            yield batch

    timer = StepTimer()
    for _ in timer.batches(loader()):
        clock[0] += 1.0  # the step itself
    assert timer.read() == {
        "data_wait": pytest.approx(2 / 3),
        "data_wait_seconds": 2.0,
        "seconds_per_step": 3.0,
    }
    assert timer.steps == 0 and timer.waited == 0.0


def test_layouts_follow_the_precision_and_the_device():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert memory_format("bf16", cuda) == memory_format("fp16", cuda) == torch.channels_last
    assert memory_format("bf16", cpu) == torch.channels_last
    assert memory_format("fp32", cuda) == memory_format("fp32", cpu) == torch.contiguous_format


def test_auto_workers_follow_the_cores_of_each_gpu_process(monkeypatch):
    monkeypatch.setattr(inference.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert resolve_num_workers("auto", "cpu") == 0 and resolve_num_workers(3, "cpu") == 3
    assert resolve_num_workers("auto", "cuda") == 15
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert resolve_num_workers("auto", "cuda") == 3
    monkeypatch.setattr(inference.os, "sched_getaffinity", lambda pid: {0})
    assert resolve_num_workers("auto", "cuda") == 1
    assert loader_options(0) == {"num_workers": 0}
    assert loader_options(2) == {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 4}


@pytest.mark.slow
def test_a_compiled_step_trains_as_the_eager_one(make_config, tmp_path):
    """``trainer.compile`` (here dynamo's ``eager`` backend, fast to compile) runs the step
    through ``torch.compile`` on the same parameters: the same losses as the eager run."""
    losses = {}
    for compile_as in (False, "eager"):
        config = load_config(
            make_config(
                schedule={"max_steps": 4},
                evaluation={"every": 4, "patience": None},
                trainer={"progress": False, "log_every": 1, "compile": compile_as},
            )
        )
        trainer = Trainer.from_config(config, tmp_path / str(compile_as))
        compiled = trainer.training_model is not trainer.model
        assert compiled == bool(compile_as)
        trainer.fit()
        losses[compile_as] = [r["loss"] for r in trainer.log.read() if r.get("split") == "train"]
    assert losses["eager"] == pytest.approx(losses[False], rel=1e-5)
