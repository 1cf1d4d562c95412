"""Plain value classes, declared like dataclasses, without importing ``dataclasses``.

The ``allrun`` command builds its options, host list and results from these before its first
ssh process starts, and ``dataclasses`` imports ``inspect``, a large share of the time before
the handshakes begin (docs/performance.md). A ``Record`` subclass lists its fields as annotations, in order,
with defaults as class values (``fresh(list)`` for a new list per instance), and gets
positional or keyword construction, ``repr`` and equality by value; ``frozen=True`` adds
immutability and a hash; ``eq=False`` compares and hashes by identity instead.
"""
from __future__ import annotations


class fresh:
    """A default made anew for each instance (``fresh(list)``), like ``field(default_factory=)``."""

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


class Record:
    _fields: tuple = ()
    _defaults: dict = {}
    _frozen = False

    def __init_subclass__(cls, frozen: bool = False, eq: bool = True, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(cls.__dict__.get("__annotations__", {}))
        cls._defaults = {name: cls.__dict__[name] for name in cls._fields if name in cls.__dict__}
        for name, default in cls._defaults.items():
            if isinstance(default, fresh):
                delattr(cls, name)   # the instance always has its own
        cls._frozen = frozen
        if not eq:
            cls.__eq__, cls.__hash__ = object.__eq__, object.__hash__
        elif frozen:
            cls.__hash__ = lambda self: hash(self._values())
        elif "__hash__" not in cls.__dict__:
            cls.__hash__ = None      # mutable and compared by value: unhashable, like a dataclass

    def __init__(self, *args, **kwargs):
        name_of = type(self).__name__
        if len(args) > len(self._fields):
            raise TypeError(f"{name_of}() takes {len(self._fields)} arguments, {len(args)} given")
        values = dict(zip(self._fields, args))
        for key, value in kwargs.items():
            if key not in self._fields:
                raise TypeError(f"{name_of}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{name_of}() got multiple values for argument {key!r}")
            values[key] = value
        for name in self._fields:
            if name not in values:
                if name not in self._defaults:
                    raise TypeError(f"{name_of}() missing required argument {name!r}")
                default = self._defaults[name]
                values[name] = default.make() if isinstance(default, fresh) else default
            object.__setattr__(self, name, values[name])

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._fields)

    def replace(self, **changes):
        """A copy with ``changes`` (what dataclasses.replace does); an unknown field is a TypeError."""
        return type(self)(**{**dict(zip(self._fields, self._values())), **changes})

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"

    def __setattr__(self, name, value):
        if self._frozen:
            raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is frozen")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self._frozen:
            raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is frozen")
        object.__delattr__(self, name)

    def __reduce__(self):
        return type(self), self._values()
