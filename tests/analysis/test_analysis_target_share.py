"""The target-tile weight share of the collage studies."""

import numpy as np
import pytest
import torch

from gspdml.analysis.target_share import tile_mass


def test_uniform_weights_give_one_tile_in_grid_squared_and_a_selected_tile_gives_one():
    uniform = torch.full((3, 8, 8), 1 / 64)
    np.testing.assert_allclose(
        tile_mass(uniform, np.array([0, 1, 3]), grid=2), [0.25] * 3, rtol=1e-6
    )
    selected = torch.zeros(2, 8, 8)
    selected[0, 4:, :4] = 1.0  # bottom-left tile: position 2 (row-major)
    selected[1, :4, 4:] = 2.0  # top-right tile: position 1
    np.testing.assert_allclose(tile_mass(selected, np.array([2, 2]), grid=2), [1.0, 0.0])
    np.testing.assert_allclose(tile_mass(selected, np.array([0, 1]), grid=2), [0.0, 1.0])


def test_a_map_that_does_not_split_into_tiles_is_refused():
    with pytest.raises(ValueError, match="does not split"):
        tile_mass(torch.ones(1, 7, 7), np.array([0]), grid=2)
