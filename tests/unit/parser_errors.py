"""Shared by the parser tests: the one clear error a bad input must give."""
import pytest

from mlp_magic.errors import MlpMagicError


def error_of(function, *args, **kwargs) -> str:
    """Call ``function``; it must raise MlpMagicError with no chained internal exception."""
    with pytest.raises(MlpMagicError) as caught:
        function(*args, **kwargs)
    error = caught.value
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    return str(error)
