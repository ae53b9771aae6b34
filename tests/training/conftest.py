import pytest


def tiny_config(tmp_path, **sections):
    """A complete run config on a small digits collage that trains in about a second."""
    config = {
        "name": "tiny",
        "output_dir": str(tmp_path / "runs"),
        "seed": 3,
        "data": {
            "dataset": {"name": "collage_digits", "images_per_class": 8, "class_split": [12, 6, 6]},
            "classes_per_batch": 4,
            "samples_per_class": 4,
        },
        "model": {"backbone": {"name": "small_cnn", "widths": [8, 16, 16]}, "embedding_dim": 16},
        "loss": {"name": "c2", "neg_margin": 0.5},
        "optimizer": {"lr": 3e-3},
        "schedule": {"max_steps": 30},
        "evaluation": {"every": 5, "patience": None},
        "trainer": {"progress": False, "log_every": 1},
    }
    for key, value in sections.items():
        if key != "loss" and isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
        else:
            config[key] = value
    return config


@pytest.fixture
def make_config(tmp_path):
    return lambda **sections: tiny_config(tmp_path, **sections)
