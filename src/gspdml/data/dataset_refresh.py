"""Putting a new extraction of a dataset in place of the previous one without losing a file the
user put in it (``gspdml data fetch`` run again).

The new extraction is built in a hidden staging folder of the dataset root
(``.gspdml-extract-<dataset>.<random>``, unique per process and held with ``flock`` while the
fetch runs) and exchanged with the previous folder in one atomic step
(:func:`gspdml.output_files.swap_folder`), so the readers' path always holds a complete dataset.
The previous folder, now in the staging folder, is then emptied by :func:`merge_replaced`:

* a file that the new extraction holds with the same bytes is removed (the fetch wrote it, and
  the new folder has it);
* a file or link the new extraction does not hold (the user's notes, their own lists) is moved
  to the same place in the new folder;
* a file the user changed (same path, other bytes) is kept, with its sub-folders, in
  ``<root>/<NAME>.replaced-<time>``, and a warning names it.

A fetch killed after the exchange leaves the previous folder in its staging folder, marked by
:data:`SWAPPED_MARK`; the next fetch of the dataset finishes its merge
(:func:`recover_interrupted`). A staging folder without the mark holds only an extraction, which
is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import filecmp
import os
import shutil
import stat
import time
import warnings
from pathlib import Path

from gspdml.output_files import is_open_as, new_held, swap_folder

STAGING_PREFIX = ".gspdml-extract-"
#: written in a staging folder before its first exchange: it may hold a previous dataset folder
SWAPPED_MARK = ".gspdml-swapped"


def new_staging(root: Path, dataset: str) -> tuple[Path, int]:
    """A new staging folder for ``dataset`` in ``root`` and the descriptor holding its lock,
    checked after the lock to be still the folder its name names (between its creation and its
    lock another fetch's :func:`recover_interrupted` may take it for a killed fetch's)."""
    fd, staging = new_held(root, f"{STAGING_PREFIX}{dataset}.", "", folder=True)
    return staging, fd


def _identical(old: Path, new: Path) -> bool:
    try:
        first, second = old.lstat(), new.lstat()
    except OSError:
        return False
    if not (stat.S_ISREG(first.st_mode) and stat.S_ISREG(second.st_mode)):
        return False
    return first.st_size == second.st_size and filecmp.cmp(old, new, shallow=False)


def _keep_name(root: Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, number = root / f"{name}.replaced-{stamp}", 1
    while os.path.lexists(candidate):
        number += 1
        candidate = root / f"{name}.replaced-{stamp}-{number}"
    return candidate


def merge_replaced(old: Path, new: Path) -> None:
    """Empty the previous dataset entry ``old`` against the new one ``new`` (module docstring):
    no file is deleted unless ``new`` holds the same bytes at the same place."""
    changed: list[Path] = []
    if old.is_symlink() or not old.is_dir():  # a file, or a link the user put in the place
        if _identical(old, new):
            old.unlink()
        else:
            changed.append(Path(old.name))
    else:
        for folder, subfolders, files in os.walk(old, topdown=False):  # links are not entered
            here = Path(folder)
            relative = here.relative_to(old)
            linked = [name for name in subfolders if (here / name).is_symlink()]
            for name in [*files, *linked]:
                source, twin = here / name, new / relative / name
                if _identical(source, twin):
                    source.unlink()
                elif not os.path.lexists(twin) and _make_folder(twin.parent):
                    os.replace(source, twin)  # the user's own file, back in its place
                else:
                    changed.append(relative / name)
            _remove_if_empty(here)
    if changed:
        kept = _keep_name(new.parent, new.name)
        os.replace(old, kept)
        examples = ", ".join(str(path) for path in changed[:5])
        warnings.warn(
            f"{new}: you changed {len(changed)} file(s) of the previous extraction ({examples}); "
            f"they are kept in {kept}, the dataset folder now holds the archive's version (your "
            "added files are still in it)",
            stacklevel=3,
        )


def _make_folder(folder: Path) -> bool:
    """Create ``folder`` in the new dataset folder; False where a file of it is in the way."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return False
    return True


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # it holds a file the user changed
        folder.rmdir()


def install(staging: Path, root: Path) -> None:
    """Exchange each entry of ``staging`` (a checked extraction) with the one of the same name in
    ``root`` and merge the previous one (module docstring); ``staging`` is left empty."""
    entries = sorted(name for name in os.listdir(staging) if name != SWAPPED_MARK)
    (staging / SWAPPED_MARK).touch()
    for name in entries:
        previous = swap_folder(staging / name, root / name)
        if previous is not None:
            merge_replaced(previous, root / name)
            if previous.parent != staging:  # set aside by two renames: its hidden folder
                _remove_if_empty(previous.parent)
    (staging / SWAPPED_MARK).unlink()


def recover_interrupted(root: Path, dataset: str) -> None:
    """Finish what a killed fetch of ``dataset`` left in ``root``: its staging folders that no
    running fetch holds are merged (those that may hold a previous folder) or removed."""
    for staging in sorted(root.glob(f"{STAGING_PREFIX}{dataset}.*")):
        if staging.is_symlink() or not staging.is_dir():
            continue
        fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a fetch running now
                continue
            if not is_open_as(staging, fd):  # another recovery removed it meanwhile
                continue
            if (staging / SWAPPED_MARK).exists():
                for name in sorted(os.listdir(staging)):
                    if name == SWAPPED_MARK:
                        continue
                    if os.path.lexists(root / name):
                        merge_replaced(staging / name, root / name)
                    else:  # not exchanged yet: a checked extraction with nothing in its place
                        os.replace(staging / name, root / name)
                (staging / SWAPPED_MARK).unlink()
                _remove_if_empty(staging)
            else:
                shutil.rmtree(staging, ignore_errors=True)  # an extraction, nothing else
        finally:
            os.close(fd)
