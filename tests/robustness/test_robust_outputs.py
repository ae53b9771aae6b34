"""Output files under real faults (a full disk is ``RLIMIT_FSIZE``: writes past the limit fail
with EFBIG): ``export``, ``report``, ``bundle`` and a dataset's extraction fail with a
``gspdml: error`` naming the target and leave the previous output as it was; ``bundle``,
``data fetch`` and the ``pretrain`` cache check their output before the work; a protocol's
``test_embeddings.npz`` damaged by a kill or a full disk is rebuilt."""

import hashlib
import io
import tarfile
import warnings

import numpy as np
import pytest

from gspdml.cli import main
from gspdml.data.cache import read_arrays, write_arrays
from gspdml.data.fetch import Archive, DatasetSource, fetch
from gspdml.output_files import OutputError
from gspdml.training import pretrain
from tests.helpers.retrieval import write_image_folder, write_run
from tests.robustness.faults import file_size_limit
from tests.workflows.test_eval_protocol_runner import tiny_config

#: over the 64 KiB probe of the up-front check, under every output written below
LIMIT = 100_000


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _no_temporaries(folder):
    return not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def _gspdml(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_a_full_disk_while_exporting_leaves_the_previous_export(tmp_path, capsys):
    write_run(tmp_path / "run")
    out = tmp_path / "export" / "embedder.pt"
    argv = ("export", tmp_path / "run", "--format", "torchscript", "--out", out)
    assert _gspdml(capsys, *argv)[0] == 0
    before = _snapshot(out.parent)
    assert len(before[out.relative_to(out.parent)]) > LIMIT
    with file_size_limit(LIMIT):
        code, err = _gspdml(capsys, *argv)
    assert code == 2 and f"gspdml: error: cannot write {out}: File too large" in err
    assert _snapshot(out.parent) == before and _no_temporaries(out.parent)


def test_a_full_disk_while_reporting_or_bundling_is_an_error_naming_the_target(tmp_path, capsys):
    write_run(tmp_path / "run")
    write_image_folder(tmp_path / "images")
    report = tmp_path / "report.html"
    argv = ("report", tmp_path / "run", "--images", tmp_path / "images", "--out", report)
    with file_size_limit(LIMIT):
        code, err = _gspdml(capsys, *argv, "--no-progress")
    assert code == 2 and f"gspdml: error: cannot write {report}: File too large" in err
    assert not report.exists() and _no_temporaries(tmp_path)

    bundle = tmp_path / "bundle"
    assert _gspdml(capsys, "bundle", tmp_path / "run", "--out", bundle)[0] == 0
    before = _snapshot(bundle)
    with file_size_limit(LIMIT):  # the weights (about 400 kB) do not fit
        code, err = _gspdml(capsys, "bundle", tmp_path / "run", "--out", bundle, "--overwrite")
    assert code == 2 and f"gspdml: error: cannot write {bundle}: File too large" in err
    assert _snapshot(bundle) == before
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(("bundle", ".bundle"))]
    assert leftovers == ["bundle"]  # no staging folder, no previous one set aside


def test_a_full_disk_while_extracting_a_dataset_leaves_the_previous_one(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:  # 300 kB of zeros: a small archive
        info = tarfile.TarInfo("tiny/images.bin")
        info.size = 300_000
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    root = tmp_path / "root"
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "images.bin").write_bytes(b"the previous extraction")
    (root / "tiny.tar.gz").write_bytes(buffer.getvalue())
    archive = Archive("tiny.tar.gz", md5=hashlib.md5(buffer.getvalue()).hexdigest())
    source = DatasetSource("tiny", (archive,), check=lambda folder: 1)
    with file_size_limit(LIMIT), pytest.raises(OutputError, match=f"cannot write {root}: File"):
        fetch(source, root, progress=False)
    assert (root / "tiny" / "images.bin").read_bytes() == b"the previous extraction"
    assert sorted(p.name for p in root.iterdir()) == ["tiny", "tiny.tar.gz"]  # no staging left
    assert fetch(source, root, progress=False) == 1  # with space, it goes through
    assert (root / "tiny" / "images.bin").read_bytes() == bytes(300_000)


def test_bundle_fetch_and_pretrain_check_their_output_before_the_work(
    tmp_path, capsys, monkeypatch
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    write_run(tmp_path / "run")
    code, err = _gspdml(capsys, "bundle", tmp_path / "run", "--out", blocker / "bundle")
    assert code == 2 and f"gspdml: error: cannot write to {blocker}: it is a file" in err

    source = DatasetSource(
        "tiny", (Archive("x.zip", md5="0" * 32, url="http://127.0.0.1:9/x"),), check=len
    )
    with pytest.raises(
        OutputError, match=f"cannot write to {blocker}/root: {blocker} is a file, not a folder"
    ):
        fetch(source, blocker / "root", progress=False)  # before any download is tried

    monkeypatch.setenv("GSPDML_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(pretrain, "train_recipe", lambda *a, **k: pytest.fail("trained first"))
    with pytest.raises(OutputError, match=f"cannot write to {blocker}"):
        pretrain.pretrained_weights_file(pretrain.recipe_names()[0], verbose=False)


def test_a_damaged_protocol_cache_is_rebuilt(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))
    config = tiny_config(tmp_path)
    assert main(["protocol", "fair", str(config), "--seeds", "0"]) == 0
    root = tmp_path / "runs" / "tiny"
    caches = sorted(root.glob("*/test_embeddings.npz"))
    before = [read_arrays(path) for path in caches]
    summary = (root / "protocol.json").read_bytes()
    caches[0].write_bytes(caches[0].read_bytes()[:100])  # what a kill or a full disk left
    caches[1].write_bytes(b"")
    with pytest.warns(RuntimeWarning, match="test_embeddings.npz: damaged"):
        assert main(["protocol", "fair", str(config), "--seeds", "0"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path, arrays in zip(caches, before):
            rebuilt = read_arrays(path)
            assert rebuilt.keys() == arrays.keys()
            assert all(np.array_equal(rebuilt[k], arrays[k]) for k in arrays)
    assert (root / "protocol.json").read_bytes() == summary

    small = {"query": np.zeros((2, 3), np.float32)}
    write_arrays(caches[0], small)
    with file_size_limit(LIMIT), pytest.raises(OutputError, match="File too large"):
        write_arrays(caches[0], {"query": np.zeros((100, 300), np.float32)})
    assert np.array_equal(read_arrays(caches[0])["query"], small["query"])
    assert _no_temporaries(root)
