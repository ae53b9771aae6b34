"""Exceptions that name the problem: the file, the config field, the value."""


class GspdmlError(Exception):
    """Base class of every error gspdml raises on purpose."""


class ConfigError(GspdmlError, ValueError):
    """An invalid configuration, raised before any work starts.

    The message always names the field (dotted path) and, where there is a closed set,
    the allowed values.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class DataError(GspdmlError):
    """A dataset file that is missing, malformed or cannot be decoded (the path is in the message)."""


class TrainingError(GspdmlError):
    """Training cannot continue (e.g. non-finite loss); the last good checkpoint is left intact."""
