"""Pickles read without running code: a received file may ask for any global (``os.system``
behind a ``REDUCE``), so :func:`load_restricted` admits only the globals a format needs and
refuses every other with a :class:`~gspdml.errors.DataError` naming the file.

:data:`NUMPY_ARRAYS` are the globals of numpy's array and dtype reconstruction (under both
module paths numpy has used): what a pickled ``ndarray`` asks for, and nothing that runs code.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Collection
from pathlib import Path
from typing import Any

from gspdml.errors import DataError

#: numpy's array and dtype reconstruction, the only globals a pickled ndarray needs
NUMPY_ARRAYS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(
        self,
        file: io.BufferedIOBase,
        path: Path,
        what: str,
        allowed: Collection[tuple[str, str]],
        encoding: str,
    ):
        super().__init__(file, encoding=encoding)
        self.path, self.what, self.allowed = path, what, allowed

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.allowed:
            raise DataError(
                f"{self.path}: refused to load: the pickle asks for {module}.{name}, which a "
                f"{self.what} file never does (it could run code); use the official {self.what} "
                "release"
            )
        return super().find_class(module, name)


def load_restricted(
    path: Path, what: str, allowed: Collection[tuple[str, str]], encoding: str = "ASCII"
) -> Any:
    """The object pickled in ``path`` (a ``what`` file), read with only the ``allowed``
    ``(module, name)`` globals; any other global, a truncated or corrupt file, or an unreadable
    one raises a :class:`DataError` naming ``path``. ``encoding``: how Python 2 strings decode
    (``"bytes"`` keeps them bytes)."""
    try:
        with open(path, "rb") as file:
            return _RestrictedUnpickler(file, path, what, allowed, encoding).load()
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error})") from None
    except DataError:
        raise
    except Exception as error:  # a truncated or corrupt pickle raises many kinds of error
        raise DataError(f"{path}: not a readable {what} pickle ({error})") from None
