"""egrad's exceptions.

Every error egrad reports is an :class:`EgradError`, of the subclass of its
kind. ``str(e)`` is exactly what the ``egrad`` command line prints (for an
error in a program: ``error: ...``, `` --> file:line:col``, the source line
with a caret, and notes); the parts are attributes:

``kind``
    ``"syntax"``, ``"type"``, ``"unsupported"``, ``"limit"``, ``"usage"``,
    ``"io"``, ``"runtime"`` or ``"internal"`` (as ``egrad::ErrorKind``).
``message``
    The one-line message, without the place.
``file``, ``line``, ``column``
    Where the error points (1-based line and column), or None for an
    error with no place (an unknown function, a bad option).
``location``
    ``"file:line:col"``, or None.
``notes``
    The notes printed after the source line (a list of str).
``helps``
    The help lines printed after the notes (a list of str): the egrad form
    of a Python or NumPy habit (``pow(x, 2)`` for ``x ** 2``), or "did you
    mean" for a misspelt name.
``exit_code``
    The CLI's exit code for this error: 1, 2 (usage) or 70 (internal).

Some classes also derive from the built-in exception Python code would
catch for the same mistake: :class:`EgradTypeError` is a ``TypeError``,
:class:`EgradUsageError` a ``ValueError``, :class:`EgradIOError` an
``OSError``, :class:`EgradRuntimeError` an ``IndexError`` (an index outside
its array, found while running).
"""

from typing import List, Optional

__all__ = [
    "EgradError",
    "EgradSyntaxError",
    "EgradTypeError",
    "EgradUnsupportedError",
    "EgradLimitError",
    "EgradUsageError",
    "EgradIOError",
    "EgradRuntimeError",
    "EgradInternalError",
    "CLASSES",
]


class EgradError(Exception):
    """An error reported by egrad (the base of all the others)."""

    kind: str
    message: str
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    notes: List[str]
    helps: List[str]
    exit_code: int

    def __init__(
        self,
        text: str,
        *,
        kind: str = "internal",
        message: Optional[str] = None,
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
        notes: Optional[List[str]] = None,
        helps: Optional[List[str]] = None,
        exit_code: int = 70,
    ) -> None:
        super().__init__(text)
        self.text = text
        self.kind = kind
        self.message = text if message is None else message
        self.file = file
        self.line = line
        self.column = column
        self.notes = list(notes or [])
        self.helps = list(helps or [])
        self.exit_code = exit_code

    @property
    def location(self) -> Optional[str]:
        """``"file:line:col"`` of the error, or None if it has no place."""
        if self.file is None or self.line is None or self.column is None:
            return None
        return f"{self.file}:{self.line}:{self.column}"

    def __str__(self) -> str:
        return self.text


class EgradSyntaxError(EgradError):
    """The text is not a program: a bad token, a missing ``)``."""


class EgradTypeError(EgradError, TypeError):
    """A name, type, size or attribute error in a program, or an argument
    that does not fit its parameter (dtype, rank, sizes)."""


class EgradUnsupportedError(EgradError):
    """Valid code that egrad does not handle yet (a documented limit)."""


class EgradLimitError(EgradError):
    """A program or a request past one of egrad's size or depth limits."""


class EgradUsageError(EgradError, ValueError):
    """The API was used wrongly: an unknown function, a wrong number of
    arguments, a bad option value."""


class EgradIOError(EgradError, OSError):
    """A file could not be read."""


class EgradRuntimeError(EgradError, IndexError):
    """A check failed while native code ran: an index outside its array.
    Nothing outside any array was read."""


class EgradInternalError(EgradError):
    """egrad broke one of its own invariants: a bug in egrad (please report
    it with the program and the call)."""


#: The class of each kind.
CLASSES = {
    "syntax": EgradSyntaxError,
    "type": EgradTypeError,
    "unsupported": EgradUnsupportedError,
    "limit": EgradLimitError,
    "usage": EgradUsageError,
    "io": EgradIOError,
    "runtime": EgradRuntimeError,
    "internal": EgradInternalError,
}
