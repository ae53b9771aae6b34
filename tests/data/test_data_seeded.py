import torch
from torch.utils.data import DataLoader, TensorDataset

from gspdml.data.seeded import SeededTransformDataset, seeded_generator
from gspdml.data.transforms import Compose, RandomShift, TilePermutation


def noise(x, generator):
    return x + torch.rand(x.shape, generator=generator)


def make():
    base = TensorDataset(torch.zeros(24, 1, 8, 8), torch.arange(24))
    return SeededTransformDataset(base, Compose([noise, RandomShift(2)]), seed=11)


def test_same_item_same_augmentation_regardless_of_workers():
    data = make()
    data.set_epoch(3)
    single = torch.cat([x for x, _ in DataLoader(data, batch_size=5, num_workers=0)])
    multi = torch.cat([x for x, _ in DataLoader(data, batch_size=5, num_workers=2)])
    assert torch.equal(single, multi)
    # item by item, in any order, and via (index, epoch) keys
    assert torch.equal(torch.stack([data[i][0] for i in reversed(range(24))]), single.flip(0))
    assert torch.equal(torch.stack([make()[(i, 3)][0] for i in range(24)]), single)
    data.set_epoch(4)
    assert not torch.equal(data[0][0], single[0])
    assert len({data[i][0].sum().item() for i in range(24)}) == 24  # items get different streams


def test_seeded_generator_is_a_function_of_its_key():
    draw = lambda *key: torch.rand(4, generator=seeded_generator(*key))  # noqa: E731
    assert torch.equal(draw(1, 2, 3), draw(1, 2, 3))
    assert (
        len({tuple(draw(*k).tolist()) for k in [(1, 2, 3), (1, 3, 2), (2, 2, 3), (1, 2, 4)]}) == 4
    )


def test_random_shift_matches_a_slow_reference():
    x = torch.arange(2 * 5 * 6, dtype=torch.float32).reshape(2, 5, 6)
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        state = g.get_state()
        y = RandomShift(2)(x, g)
        g2 = torch.Generator()
        g2.set_state(state)
        dy, dx = (int(torch.randint(-2, 3, (1,), generator=g2)) for _ in range(2))
        for i in range(5):
            for j in range(6):
                si, sj = min(max(i - dy, 0), 4), min(max(j - dx, 0), 5)
                assert torch.equal(y[:, i, j], x[:, si, sj])


def test_tile_permutation_moves_whole_tiles():
    x = torch.arange(3 * 6 * 6, dtype=torch.float32).reshape(3, 6, 6)
    y = TilePermutation(3)(x, torch.Generator().manual_seed(1))
    tiles = lambda z: sorted(
        z[:, r : r + 2, c : c + 2].numpy().tobytes() for r in (0, 2, 4) for c in (0, 2, 4)
    )  # noqa: E731
    assert tiles(x) == tiles(y) and not torch.equal(x, y)
