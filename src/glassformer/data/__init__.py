"""Data: the bundled zh→en corpus, algorithmic tasks, and readers for the user's own files.

- `zh_en.zh_en_splits(seed)`: train/valid/test, the test split built from role-reversed pairs.
- `tasks.make_task(name, n)`: copy, reverse, sort, add.
- `files.read_tsv(path)`, `files.read_text(path)`: streaming, validated readers.
"""

from .files import read_text, read_tsv
from .tasks import TASKS, make_task
from .zh_en import LEXICON, role_reversed_pairs, translate, zh_en_splits

__all__ = ["LEXICON", "TASKS", "make_task", "read_text", "read_tsv", "role_reversed_pairs",
           "translate", "zh_en_splits"]
