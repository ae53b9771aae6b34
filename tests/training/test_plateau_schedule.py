"""``PlateauSchedule`` against torch's ``ReduceLROnPlateau`` (convention ``torch``) and a
transcription of ``tf.keras.callbacks.ReduceLROnPlateau.on_epoch_end`` (convention ``keras``), fed
the same metric sequences: ties, improvements just below and above the threshold, long plateaus."""

import pytest
import torch

from gspdml.training.optim import PlateauSchedule

BASE_LR = 4e-3


def optimizer():
    """Three groups at the base rate times 1, 0 (a frozen group) and 1e5 (ProxyNCA++'s proxies)."""
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(3)]
    groups = [
        {"params": [p], "lr": BASE_LR * m, "initial_lr": BASE_LR * m}
        for p, m in zip(params, (1.0, 0.0, 1e5))
    ]
    return torch.optim.Adam(groups, lr=BASE_LR)


def metric_sequences():
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        steps = torch.randint(0, 4, (30,), generator=gen)
        # 0: repeat, 1: +1e-5 relative (below torch's 1e-4), 2: +1e-3 relative, 3: a fall
        values, value = [], 0.5
        for s in steps.tolist():
            value *= (1.0, 1.0 + 1e-5, 1.0 + 1e-3, 0.97)[s]
            values.append(value)
        yield values


def keras_reference(values, lrs, factor, patience, min_delta, min_lrs):
    """tf.keras ReduceLROnPlateau(mode="max", cooldown=0).on_epoch_end, one rate per group."""
    best, wait, out = float("-inf"), 0, []
    for value in values:
        if value > best + min_delta:
            best, wait = value, 0
        else:
            wait += 1
            if wait >= patience:
                lrs = [max(lr * factor, m) if lr > m else lr for lr, m in zip(lrs, min_lrs)]
                wait = 0
        out.append(list(lrs))
    return out


@pytest.mark.parametrize("patience", [1, 2, 4])
@pytest.mark.parametrize("threshold", [0.0, 1e-4])
@pytest.mark.parametrize("min_lr", [0.0, 1e-4])
def test_torch_convention_is_torchs_reduce_on_plateau(patience, threshold, min_lr):
    for values in metric_sequences():
        ours_opt, theirs_opt = optimizer(), optimizer()
        ours = PlateauSchedule(
            ours_opt, BASE_LR, 0.1, patience, min_lr, convention="torch", threshold=threshold
        )
        theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(
            theirs_opt,
            mode="max",
            factor=0.1,
            patience=patience,
            threshold=threshold,
            threshold_mode="rel",
            min_lr=[min_lr * g["initial_lr"] / BASE_LR for g in theirs_opt.param_groups],
        )
        for step, value in enumerate(values):
            ours.step(value, at_step=step)
            theirs.step(value)
            assert [g["lr"] for g in ours_opt.param_groups] == [
                g["lr"] for g in theirs_opt.param_groups
            ]
            assert ours.bad_rounds == theirs.num_bad_epochs


@pytest.mark.parametrize("patience", [1, 3, 4])
@pytest.mark.parametrize("threshold", [0.0, 1e-3])
def test_keras_convention_is_keras_reduce_on_plateau(patience, threshold):
    min_lr = 1e-6
    for values in metric_sequences():
        opt = optimizer()
        ours = PlateauSchedule(opt, BASE_LR, 0.5, patience, min_lr, threshold=threshold)
        lrs = [g["lr"] for g in opt.param_groups]
        floors = [min_lr * g["initial_lr"] / BASE_LR for g in opt.param_groups]
        expected = keras_reference(values, lrs, 0.5, patience, threshold, floors)
        for step, (value, rates) in enumerate(zip(values, expected)):
            ours.step(value, at_step=step)
            assert [g["lr"] for g in opt.param_groups] == pytest.approx(rates, rel=1e-12)


def test_the_two_conventions_differ_by_one_round_and_the_threshold():
    """Fed the same scores, torch's rule drops one round later than keras' (ProxyNCA++ issue:
    gspdml's former rule dropped at `patience`, one epoch before the authors' code)."""
    drops = {}
    for convention, threshold in (("keras", 0.0), ("torch", 1e-4)):
        opt = optimizer()
        schedule = PlateauSchedule(opt, BASE_LR, 0.1, 4, 0.0, convention, threshold)
        for step, value in enumerate([0.5, 0.50001, 0.50002, 0.50003, 0.50004, 0.50005]):
            schedule.step(value, at_step=step)
        drops[convention] = schedule.drops
    # keras: every round improves (no min_delta): no drop; torch: 5 rounds below 1e-4 -> a drop
    assert drops == {"keras": [], "torch": [5]}
