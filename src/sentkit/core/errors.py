"""The one error contract: :class:`SentkitError`, the base of every error sentkit raises on purpose.

A sentkit error's class carries what the command line does with it: ``exit_code`` (2: the input or
the command line is wrong; 1: the environment failed, e.g. another process of a run died) and
``user_line()``, the one line a user sees after ``sentkit <command>: error:``. Each subclass also keeps
the standard-library base it always had (``ConfigError`` is a ``ValueError``, ``PathError`` an
``OSError``, ...), so ``except ValueError`` in user code goes on working.
"""

from __future__ import annotations


def one_line(text: object) -> str:
    """`text` with its lines joined by single spaces (a message is one line on the terminal)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


class SentkitError(Exception):
    """Base of sentkit's own errors: a deliberate check, never a bug. Subclasses set ``exit_code``
    (a class attribute, or a property where it depends on the instance) and may override
    ``user_line``."""

    exit_code: int = 2

    def user_line(self) -> str:
        """The one line a user reads: the message on one line, or the class name when it is empty."""
        return one_line(str(self)) or type(self).__name__


class InputError(SentkitError, ValueError):
    """A value a user gave (a file's content, an argument, an array) that sentkit cannot use; the
    message says which and how to fix it."""


class InputTypeError(SentkitError, TypeError):
    """A value a user gave is of a kind sentkit cannot use (an object given where an encoder is
    expected, say); the message says what was expected."""


class MissingInputError(SentkitError, FileNotFoundError):
    """A file or folder a user named (or that a command needs, e.g. task data) does not exist; the
    message names it and how to get it."""


class UserCodeError(SentkitError, RuntimeError):
    """A user's own code that sentkit runs raised: a model given as ``file.py:attr`` or ``module:attr``
    whose ``encode`` failed. Neither a sentkit bug nor a bad argument, so exit 1; the line names the
    model and the exception (its traceback: ``SENTKIT_DEBUG=1`` or ``-vv``), the exception itself is
    ``error`` and ``__cause__``."""

    exit_code = 1

    def __init__(self, spec: str, error: BaseException) -> None:
        self.spec = spec
        self.error = error
        super().__init__(f"the model {spec!r} raised {type(error).__name__}: {error}")

    def user_line(self) -> str:
        return one_line(f"{self}; the error is in that code (rerun with SENTKIT_DEBUG=1 or -vv for its traceback)")
