import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import reducers as pml_reducers
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES


def _xbm(base="c2", **options):
    """The XBM authors' rule (enqueue and read from ``start_step`` on) unless the test names one."""
    return LOSSES.build({"xbm": {"base": base, "fill_before_start": False, **options}})


def test_memory_is_a_ring_buffer_in_write_order(make_batch):
    loss = _xbm(memory_batches=2, start_step=0).train()
    batches = [make_batch(seed=s, classes=2, per_class=2) for s in range(3)]
    for emb, labels in batches:
        loss(emb, labels)
    # 2 batches of 4 rows: the third batch overwrote the first
    assert torch.equal(loss.memory[:4], batches[2][0].detach()) and torch.equal(
        loss.memory[4:], batches[1][0].detach()
    )
    assert torch.equal(loss.memory_labels, torch.cat([batches[2][1], batches[1][1]]))
    assert (int(loss.pointer), int(loss.filled), int(loss.step)) == (4, 8, 3)
    assert not loss.memory.requires_grad and loss.memory.dtype == torch.float64


def test_batch_is_enqueued_before_the_loss_and_self_pairs_are_removed(make_batch):
    """At the first active step the memory holds exactly the batch, so with its own copies removed
    the memory term equals the in-batch loss: L = (1 + w) L_base(batch)."""
    emb, labels = make_batch(seed=40, classes=4, per_class=3)
    base = LOSSES.build("c2")
    loss = _xbm(memory_batches=3, memory_weight=0.5, start_step=0).train()
    value = loss(emb, labels)
    assert value.item() == pytest.approx(1.5 * base(emb, labels).item(), rel=1e-12)
    with_self = base(emb, labels, reference=emb.detach(), reference_labels=labels)
    assert (
        abs(with_self.item() - base(emb, labels).item()) > 1e-3
    )  # self-pairs would change the value


def test_memory_term_starts_after_warmup_and_eval_mode_leaves_memory_alone(make_batch):
    loss = _xbm(memory_batches=4, start_step=2)
    base = LOSSES.build("c2")
    batches = [make_batch(seed=50 + s) for s in range(3)]
    loss.eval()
    loss(*batches[0])
    assert int(loss.step) == 0 and loss.memory.numel() == 0
    loss.train()
    for emb, labels in batches[:2]:
        assert loss(emb, labels).item() == pytest.approx(base(emb, labels).item(), rel=1e-12)
    assert int(loss.filled) == 0 and loss.active  # the third step is the first with memory
    emb, labels = batches[2]
    assert loss(emb, labels).item() == pytest.approx(2 * base(emb, labels).item(), rel=1e-12)
    assert int(loss.filled) == 16 and int(loss.step) == 3


def test_state_dict_restores_memory_and_step_into_a_fresh_module(make_batch):
    loss = _xbm(base="ms", memory_batches=2, start_step=1).train()
    for seed in range(3):
        loss(*make_batch(seed=60 + seed))
    state = load_safetensors(save_safetensors(dict(loss.state_dict())))  # the checkpoint format
    resumed = _xbm(base="ms", memory_batches=2, start_step=1).train()
    resumed.load_state_dict(
        load_safetensors(save_safetensors(dict(resumed.state_dict())))
    )  # not yet allocated
    resumed.load_state_dict(state)
    emb, labels = make_batch(seed=70)
    assert resumed(emb, labels).item() == pytest.approx(loss(emb, labels).item(), rel=1e-12)
    assert torch.equal(resumed.memory, loss.memory) and int(resumed.step) == int(loss.step) == 4


def test_xbm_matches_pml_cross_batch_memory_plus_in_batch_loss(make_batch):
    """XBM official: L(batch, batch) + w L(batch, memory) == PML plain loss + w * CrossBatchMemory."""
    pml_base = pml_losses.ContrastiveLoss(
        pos_margin=0.1, neg_margin=1.1, reducer=pml_reducers.MeanReducer()
    )
    pml_xbm = pml_losses.CrossBatchMemory(
        pml_losses.ContrastiveLoss(
            pos_margin=0.1, neg_margin=1.1, reducer=pml_reducers.MeanReducer()
        ),
        embedding_size=8,
        memory_size=32,
    )
    c2 = {"c2": {"pos_margin": 0.1, "neg_margin": 1.1, "reduction": "mean"}}
    ours = _xbm(base=c2, memory_batches=2, memory_weight=0.7, start_step=0)
    ours.train()
    for seed in range(5):  # wraps around the 2-batch memory twice
        emb, labels = make_batch(seed=80 + seed)
        expected = pml_base(emb, labels) + 0.7 * pml_xbm(emb.double(), labels)
        assert ours(emb, labels).item() == pytest.approx(expected.item(), rel=1e-9)


def test_gradient_of_memory_term_flows_through_anchors_only(make_batch):
    loss = _xbm(memory_batches=2, start_step=0).train()
    loss(*make_batch(seed=90))
    emb, labels = make_batch(seed=91)
    loss(emb, labels).backward()
    assert emb.grad.abs().sum() > 0 and loss.memory.grad is None


def test_xbm_wraps_an_already_built_pair_loss(make_batch):
    from gspdml.losses.xbm import CrossBatchMemory

    base = LOSSES.build({"triplet": {"margin": 0.2}})
    loss = CrossBatchMemory(base, memory_batches=1, start_step=0, fill_before_start=False).train()
    emb, labels = make_batch(seed=95)
    assert loss.base is base
    assert loss(emb, labels).item() == pytest.approx(2 * base(emb, labels).item(), rel=1e-12)


def test_tf_start_rule_enqueues_from_step_0_and_reads_a_full_memory(make_batch):
    """The GSP authors' TF rule, worked by hand for start_step = 2, memory_batches = 3: steps 0-3
    enqueue but use the in-batch term only (after step k the memory holds k + 1 batches, and the
    term needs start_step + memory_batches = 5); step 4 is the first with the memory term, which
    then holds batches 2, 3, 4 (batches 0 and 1 were overwritten)."""
    loss = LOSSES.build({"xbm": {"base": "c2", "memory_batches": 3, "start_step": 2}}).train()
    base = LOSSES.build("c2")
    batches = [make_batch(seed=100 + s) for s in range(5)]
    for k, (emb, labels) in enumerate(batches[:4]):
        assert loss(emb, labels).item() == pytest.approx(base(emb, labels).item(), rel=1e-12)
        assert int(loss.filled) == min(k + 1, 3) * len(labels)
    assert loss.active and int(loss.step) == 4
    emb, labels = batches[4]
    size = len(labels)
    # ring slots after five writes of one batch each: slot 0 <- 0, 3; slot 1 <- 1, 4; slot 2 <- 2
    memory = torch.cat([batches[3][0], batches[4][0], batches[2][0]]).detach()
    memory_labels = torch.cat([batches[3][1], batches[4][1], batches[2][1]])
    expected = base(emb, labels) + base(
        emb,
        labels,
        reference=memory,
        reference_labels=memory_labels,
        reference_self=torch.arange(size, 2 * size),
    )
    assert loss(emb, labels).item() == pytest.approx(expected.item(), rel=1e-12)
    assert torch.equal(loss.memory, memory.to(loss.memory.dtype))


def test_xbm_rejects_proxy_bases_and_bad_sizes():
    with pytest.raises(ConfigError, match=r"loss\.base: must be a pair loss"):
        LOSSES.build({"xbm": {"base": "proxy_anchor"}}, num_classes=3, embedding_dim=4)
    with pytest.raises(ConfigError, match=r"loss\.memory_batches: must be >= 1"):
        _xbm(memory_batches=0)
