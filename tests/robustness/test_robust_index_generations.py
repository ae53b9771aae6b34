"""An index folder is replaced as one generation (gspdml.retrieval.generations): a failed
approximate build, a SIGKILL in the middle of a save and a full disk all leave the previous
generation current and usable; a mixed or altered generation is refused naming the file; a
folder written before manifests still loads and becomes a generation at its next save."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from gspdml.errors import ConfigError, DataError, GspdmlError
from gspdml.output_files import OutputError
from gspdml.retrieval import generations
from gspdml.retrieval.index import RetrievalIndex
from tests.helpers.retrieval import index_file, run_cli, write_image_folder, write_run
from tests.robustness.faults import KILL_AFTER_SAVE_FILE, file_size_limit, run_python

BEFORE_MANIFESTS = Path(__file__).parent / "data" / "index_before_manifests"


def _index(rows: int, seed: int, backend: str = "hnsw") -> RetrievalIndex:
    vectors = torch.randn(rows, 4, generator=torch.Generator().manual_seed(seed))
    index = RetrievalIndex(vectors, [f"/images/{seed}/{i}.png" for i in range(rows)], [None] * rows)
    index.build_approximate(backend, recall_k=2, recall_sample=4)
    return index


def _assert_same(loaded: RetrievalIndex, expected: RetrievalIndex) -> None:
    assert torch.equal(loaded.vectors, expected.vectors) and loaded.paths == expected.paths
    assert loaded.approximate is not None and loaded.approximate.count == len(expected)
    everything = loaded.vectors
    approximate = loaded.search(everything, 3).indices
    assert torch.equal(approximate, loaded.search(everything, 3, exact=True).indices)


def _generations(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(generations.PREFIX))


def test_a_failed_approximate_rebuild_leaves_the_previous_generation(tmp_path):
    write_run(tmp_path / "run")
    write_image_folder(tmp_path / "old", per_class=4)
    write_image_folder(tmp_path / "new", classes=("red", "blue"), per_class=3, seed=1)
    idx = tmp_path / "idx"
    common = ("--out", idx, "--no-progress", "--recall-sample", "4")
    assert run_cli("index", tmp_path / "run", tmp_path / "old", *common, "--backend", "hnsw") == 0
    before = RetrievalIndex.load(idx)
    manifest = (idx / generations.MANIFEST_FILE).read_bytes()
    # new images, then an ivfpq structure that cannot be built (7 does not divide the dim 32)
    with pytest.raises(ConfigError, match="--pq-m: must divide the dimension 32"):
        run_cli(
            "index", tmp_path / "run", tmp_path / "new", *common, "--overwrite", "--backend",
            "ivfpq", "--pq-m", "7",
        )  # fmt: skip
    assert (idx / generations.MANIFEST_FILE).read_bytes() == manifest
    _assert_same(RetrievalIndex.load(idx), before)
    assert len(_generations(idx)) == 1


def test_a_kill_in_the_middle_of_a_save_leaves_the_previous_generation(tmp_path):
    before = _index(6, seed=0)
    before.save(tmp_path / "idx")
    child = run_python(
        KILL_AFTER_SAVE_FILE
        + f"""
import torch
import gspdml.retrieval.index as index_module
from gspdml.retrieval.index import RetrievalIndex
index = RetrievalIndex.load({str(tmp_path / "idx")!r})
index.add(torch.ones(2, 4), ["/images/new/0.png", "/images/new/1.png"], [None, None])
index.update_approximate(recall_k=2, recall_sample=4)
kill_after(index_module)  # SIGKILL once the new vectors are on disk
index.save({str(tmp_path / "idx")!r})
"""
    )
    assert child.returncode == -9, child.stderr
    _assert_same(RetrievalIndex.load(tmp_path / "idx"), before)
    after = _index(9, seed=1)  # the next save removes the killed one's generation
    after.save(tmp_path / "idx")
    _assert_same(RetrievalIndex.load(tmp_path / "idx"), after)
    assert len(_generations(tmp_path / "idx")) == 1


def test_a_full_disk_while_appending_leaves_the_previous_generation(tmp_path):
    before = _index(6, seed=0)
    before.save(tmp_path / "idx")
    index = RetrievalIndex.load(tmp_path / "idx")
    # 600 new rows: their vectors (10 kB) fit under the limit, the metadata with their long
    # names (over 90 kB) does not, so the save fails after a file of the generation is written
    index.add(
        torch.ones(600, 4),
        [f"/images/{'long-name-' * 14}{i}.png" for i in range(600)],
        [None] * 600,
    )
    with file_size_limit(64 * 1024), pytest.raises(OutputError) as failure:
        index.save(tmp_path / "idx")
    assert "index.json: File too large" in str(failure.value) and "is intact" in str(failure.value)
    assert isinstance(failure.value, GspdmlError)  # `gspdml index` prints it as an error
    _assert_same(RetrievalIndex.load(tmp_path / "idx"), before)
    assert len(_generations(tmp_path / "idx")) == 1
    assert not [p for p in (tmp_path / "idx").rglob("*") if p.name.endswith(".tmp")]


def test_a_mixed_partial_or_altered_generation_is_refused_naming_the_file(tmp_path):
    _index(6, seed=0).save(tmp_path / "a")
    _index(6, seed=1).save(tmp_path / "b")
    vectors = index_file(tmp_path / "a", "vectors.safetensors")
    shutil.copyfile(index_file(tmp_path / "b", "vectors.safetensors"), vectors)  # same size
    with pytest.raises(DataError, match=f"{vectors}: its sha256 differs from generation 1"):
        RetrievalIndex.load(tmp_path / "a")

    _index(6, seed=0).save(tmp_path / "c")
    faiss_file = index_file(tmp_path / "c", "ann.faiss")
    faiss_file.write_bytes(faiss_file.read_bytes()[:-10])
    for mmap in (False, True):  # a mapped faiss file is checked by its size
        with pytest.raises(DataError, match=f"{faiss_file}: .* bytes, .* in generation 1"):
            RetrievalIndex.load(tmp_path / "c", mmap=mmap)
    faiss_file.unlink()
    with pytest.raises(DataError, match=f"{faiss_file}: missing, though listed"):
        RetrievalIndex.load(tmp_path / "c")


def test_an_index_written_before_manifests_loads_and_becomes_a_generation(tmp_path):
    folder = shutil.copytree(BEFORE_MANIFESTS, tmp_path / "idx")  # written by gspdml 0.x
    old = RetrievalIndex.load(folder)
    expected = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(old.vectors, expected) and old.labels == ["a", "a", "b", "b", None, "c"]
    assert old.approximate is not None and old.approximate.params.backend == "hnsw"
    assert torch.equal(old.search(expected, 2).indices, old.search(expected, 2, exact=True).indices)

    old.add(torch.zeros(1, 4), ["img6.png"], ["c"])
    old.update_approximate(recall_k=2, recall_sample=3)
    old.save(folder)
    names = sorted(p.name for p in folder.iterdir())
    assert names == [*_generations(folder), generations.MANIFEST_FILE]  # top-level files gone
    again = RetrievalIndex.load(folder, mmap=True)
    assert len(again) == 7 and torch.equal(again.vectors[:6], expected)
    manifest = json.loads((folder / generations.MANIFEST_FILE).read_text())
    assert sorted(manifest["files"]) == [
        "ann.faiss",
        "ann.json",
        "index.json",
        "vectors.safetensors",
    ]

    meta = json.loads((BEFORE_MANIFESTS / "index.json").read_text())  # its own checks still apply
    legacy = shutil.copytree(BEFORE_MANIFESTS, tmp_path / "legacy")
    (legacy / "index.json").write_text(json.dumps({**meta, "count": 5, "paths": meta["paths"][:5]}))
    with pytest.raises(DataError, match="inconsistent index"):
        RetrievalIndex.load(legacy)
