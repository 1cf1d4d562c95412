"""The one error type users see: a single clear line naming the problem."""


class MlpMagicError(Exception):
    """Bad input or an environment problem, worded for the user.

    Raised with a message that names the offending thing (file and line, option,
    value). Magics and commands print it as one line, never a traceback.
    """

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"mlp_magic: {self}"]
