"""Shared by the fuzz tests of user input: the example budget and how a refusal is checked (only
MlpMagicError, alone, one line, naming the offending value)."""
from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from mlp_magic.errors import MlpMagicError

# 200 examples keep the suite fast; MLP_FUZZ_EXAMPLES=5000 for a deeper run by hand.
FUZZ = settings(max_examples=int(os.environ.get("MLP_FUZZ_EXAMPLES", "200")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- checking messages

def _plain(text: str) -> str:
    """Quotes and backslashes removed, case folded: a value shown with repr() or as-is compares equal."""
    return re.sub(r"[\\'\"]", "", text).casefold()


def mentions(message: str, *texts: str) -> bool:
    """Does the message name some piece of one of the texts (its first characters, raw or repr'd)?"""
    shown = _plain(message)
    for text in texts:
        # Python's whitespace includes \x1c-\x1f, a shell's (shlex's) does not: split both ways
        pieces = (re.split(r"[\s=:@,#\[\]$'\"]+", text) + re.split(r"[\s,]+", text) + text.split()
                  + re.split(r"[ \t\n\r\f\v]+", text) + [text.strip(), text])
        if not text.strip() and re.search(r"empty|no hosts|names no|no command", message):
            return True   # a blank value can only be named as such
        for piece in filter(None, pieces):
            head = piece[:10]
            if _plain(head) in shown or _plain(repr(head)[1:-1]) in shown:
                return True
    return False


def only_our_error(function, *args, **kwargs):
    """Call; return (result, None) or (None, message) for an MlpMagicError; anything else fails."""
    try:
        result = function(*args, **kwargs)
        event("parsed")   # --hypothesis-show-statistics: the mix of good and bad inputs
        return result, None
    except MlpMagicError as error:
        event("refused")
        assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__), \
            f"chained: {error!r} from {error.__context__!r}"
        message = str(error)
        assert message and "\n" not in message.strip(), f"not one line: {message!r}"
        return None, message


JUNK = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
