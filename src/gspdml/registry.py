"""Registries map config names to classes, so adding a method is one class and one line.

A *spec* names a registered entry and its keyword arguments, in either of two YAML forms::

    pooling: {name: gsp, mu: 0.3}        # "name" key
    pooling: {gsp: {mu: 0.3}}            # single-key form (handy for nesting wrappers)
    pooling: gap                         # bare name, no arguments

An unknown option, a value of the wrong type or outside its declared range (the constructor's
annotations, :mod:`gspdml.typecheck`), or options that do not fit together (a class's
``check_options``) fail before anything is built, naming the field and what is allowed; a
registered class checks them the same way when it is built from Python.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Optional, TypeVar

from gspdml.errors import ConfigError, GspdmlError, did_you_mean
from gspdml.typecheck import Refusal, first_mismatch, out_of_range

_Factory = TypeVar("_Factory", bound=Callable[..., Any])


def supplied_by_caller(*names: str) -> Callable[[_Factory], _Factory]:
    """Mark the arguments of a factory function that its caller passes (the run's ``seed``), not
    the config: they are no options (a class declares its ``supplied_by_caller`` attribute)."""

    def mark(factory: _Factory) -> _Factory:
        # a function takes attributes; the registry reads this one with getattr
        factory.supplied_by_caller = names  # type: ignore[attr-defined]
        return factory

    return mark


def documented_by(*sources: Callable[..., Any]) -> Callable[[_Factory], _Factory]:
    """Name the callables whose ``Args:`` document options a factory shares with others (the
    validation folds, a collage's augmentation): :mod:`gspdml.config.options` reads them after
    the factory's own docstring."""

    def mark(factory: _Factory) -> _Factory:
        factory.documented_by = sources  # type: ignore[attr-defined]
        return factory

    return mark


def parse_spec(spec: Any, field: str) -> tuple[str, dict[str, Any]]:
    """Split a spec into ``(name, kwargs)``; see the module docstring for the accepted forms."""
    if isinstance(spec, str):
        return spec, {}
    if isinstance(spec, Mapping):
        if "name" in spec:
            kwargs = {k: v for k, v in spec.items() if k != "name"}
            return str(spec["name"]), kwargs
        if len(spec) == 1:
            ((name, kwargs),) = spec.items()
            if kwargs is None:
                kwargs = {}
            if not isinstance(kwargs, Mapping):
                raise ConfigError(
                    f"{field}.{name}", f"expected a mapping of options, got {kwargs!r}"
                )
            return str(name), dict(kwargs)
    raise ConfigError(field, f"expected a name or a mapping with 'name', got {spec!r}")


class Registry:
    """A named collection of constructors, e.g. ``POOLINGS = Registry("pooling")``.

    A registered class may declare ``nested = {argument: registry}`` (arguments that are specs of
    another registry, checked recursively) and a classmethod ``check_options(**options) ->
    Refusal`` for rules that relate options, given every option with the defaults filled in.
    ``field`` names the options of a component built from Python (``model.pooling``);
    ``complete``: a checked spec must give every option without a default (a dataset's ``root``
    may come later, from ``--data-root`` or an override, so its registry is not)."""

    def __init__(self, kind: str, field: str = "", complete: bool = True):
        self.kind = kind
        self.field = field or kind
        self.complete = complete
        self._entries: dict[str, Callable[..., Any]] = {}
        self._primary: dict[str, str] = {}  # alias -> the name it was registered with

    def register(self, name: str, *aliases: str) -> Callable[[_Factory], _Factory]:
        def decorate(obj: _Factory) -> _Factory:
            for key in (name, *aliases):
                if key in self._entries and self._entries[key] is not obj:
                    raise ValueError(f"{self.kind} '{key}' is registered twice")
                self._entries[key] = obj
                self._primary[key] = name
            if inspect.isclass(obj):
                _check_when_built(obj, self.field)
            return obj

        return decorate

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def names(self) -> list[str]:
        return sorted(self._entries)

    def fingerprint(self) -> tuple[tuple[str, int], ...]:
        """What is registered now (each name and the identity of its constructor): it changes
        when a plugin registers, or a component is registered again under its name."""
        return tuple((name, id(factory)) for name, factory in sorted(self._entries.items()))

    def registered_from(self, module: str) -> list[str]:
        """The names (not aliases) whose constructor is defined in ``module`` or a submodule."""
        return sorted(
            name
            for name, factory in self._entries.items()
            if self._primary[name] == name
            and (getattr(factory, "__module__", "") or "").split(".")[: len(module.split("."))]
            == module.split(".")
        )

    def primary(self, name: str) -> str:
        """The name ``name`` was registered with (itself unless it is an alias)."""
        return self._primary[name]

    def options(self, name: str) -> list[inspect.Parameter]:
        """The parameters of ``name``'s constructor that a config may set: its keyword
        parameters less those its caller supplies (``in_channels``, ``seed``, ...); empty for a
        constructor without a readable signature."""
        return _config_options(self.get(name))

    def get(self, name: str, field: str = "") -> Callable[..., Any]:
        try:
            return self._entries[name]
        except KeyError:
            allowed = ", ".join(self.names())
            raise ConfigError(
                field or self.kind,
                f"unknown {self.kind} {name!r}{did_you_mean(name, self.names())}; "
                f"allowed: {allowed}",
            ) from None

    def check(self, spec: Any, field: str, refuse_at: str = "") -> tuple[str, dict[str, Any]]:
        """Validate a spec without building it; returns ``(name, kwargs)``. A value out of its
        range, or refused by ``check_options``, is named under ``refuse_at`` (``field``)."""
        name, kwargs = parse_spec(spec, field)
        factory = self.get(name, field)
        _check_kwargs(factory, name, kwargs, field)
        if self.complete:
            _require_options(factory, name, kwargs, field)
        for arg, registry in getattr(factory, "nested", {}).items():
            if kwargs.get(arg) is not None:
                registry.check(kwargs[arg], f"{field}.{arg}")
        options = _config_options(factory)
        defaults = {p.name: p.default for p in options if p.default is not p.empty}
        _refuse(factory, {**defaults, **kwargs}, refuse_at or field)
        return name, kwargs

    def build(self, spec: Any, field: str = "", **extra: Any) -> Any:
        """Build the entry named by ``spec``; ``extra`` are arguments supplied by the caller
        (e.g. ``in_channels``), not by the config. Without ``field`` (a build from Python) a
        refused value is named as the component names its own (:func:`_config_field`)."""
        name = parse_spec(spec, field or self.kind)[0]
        refuse_at = field or _config_field(self._entries.get(name), self.field)
        field = field or self.kind
        name, kwargs = self.check(spec, field, refuse_at)
        factory = self._entries[name]
        try:
            return factory(**_accepted(factory, extra), **kwargs)
        except GspdmlError:
            raise
        except Exception as exc:
            origin = getattr(factory, "__module__", "") or ""
            library = origin == "gspdml" or origin.startswith("gspdml.")
            if library and not isinstance(exc, (ValueError, TypeError, RuntimeError)):
                raise
            # a constructor that refuses the config's options (any error of a plugin's): the
            # error names the field and the component; the original stays chained
            where = f"{origin}.{getattr(factory, '__qualname__', name)}"
            raise ConfigError(
                field, f"{self.kind} {name!r} ({where}) failed: {type(exc).__name__}: {exc}"
            ) from exc


def _accepted(factory: Callable[..., Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """The caller-supplied arguments that ``factory`` takes (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return dict(extra)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(extra)
    return {k: v for k, v in extra.items() if k in params}


def _config_options(factory: Callable[..., Any]) -> list[inspect.Parameter]:
    """:meth:`Registry.options` of one factory."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    hidden = set(getattr(factory, "supplied_by_caller", ()))
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p for p in params if p.kind in keyword and p.name not in hidden]


def _check_kwargs(
    factory: Callable[..., Any], name: str, kwargs: Mapping[str, Any], field: str
) -> None:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    allowed = [p.name for p in _config_options(factory)]
    for key in kwargs:
        if key not in allowed:
            raise ConfigError(
                f"{field}.{key}", f"unknown option for '{name}'; allowed: {', '.join(allowed)}"
            )
    mismatch = first_mismatch(
        factory, {k: v for k, v in kwargs.items() if k not in getattr(factory, "nested", {})}
    )
    if mismatch and not out_of_range(factory, kwargs):  # else the range is the message
        key, expected = mismatch
        raise ConfigError(
            f"{field}.{key}", f"expected {expected} for '{name}', got {kwargs[key]!r}"
        )


def _require_options(
    factory: Callable[..., Any], name: str, kwargs: Mapping[str, Any], field: str
) -> None:
    for option in _config_options(factory):
        if option.default is option.empty and option.name not in kwargs:
            raise ConfigError(f"{field}.{option.name}", f"'{name}' needs this option (no default)")


def _refuse(factory: Callable[..., Any], options: Mapping[str, Any], field: str) -> None:
    """Raise a ConfigError at ``field.<option>`` for an option outside the range ``factory``
    declares, or options that its ``check_options`` refuses together."""
    hook: Optional[Callable[..., Refusal]]
    hook = getattr(factory, "check_options", None)
    refused = out_of_range(factory, options) or (hook(**options) if hook else None)
    if refused:
        key, message = refused
        raise ConfigError(f"{field}.{key}", message)


def _config_field(factory: Any, default: str) -> str:
    """Where a component built from Python names its options: its ``config_field`` if it
    declares one (``triplet``: ``triplet.mining``), else its registry's (``model.pooling``)."""
    return str(getattr(factory, "config_field", default))


def _check_when_built(cls: type, field: str) -> None:
    """Make building ``cls`` from Python check its arguments as :meth:`Registry.check` checks a
    spec's, before its ``__init__`` runs (a ``__new__``: the constructor stays as written)."""
    if any("__new__" in vars(base) for base in cls.__mro__[:-1]):
        return  # checked already (a registered base), or a class that makes its own objects

    @functools.wraps(cls.__init__)  # type: ignore[misc]  # its signature: the class's
    def checked(made: type, *args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(made).bind_partial(*args, **kwargs)
        bound.apply_defaults()
        _refuse(made, bound.arguments, _config_field(made, field))
        return object.__new__(made)

    cls.__new__ = staticmethod(checked)  # type: ignore[assignment]
