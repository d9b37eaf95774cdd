"""The errors glassformer raises for a user's mistake.

Each carries one line that says what was wrong and what would be right; the CLI prints that
line (no traceback) and exits non-zero.
"""


class GlassformerError(Exception):
    """Base class: a mistake in what the user gave us, reported in one line."""


class ConfigError(GlassformerError, ValueError):
    """A configuration value is wrong; the message names the field and the value."""


class InputError(GlassformerError, ValueError):
    """A tensor, token, file or request given to glassformer is malformed."""
