"""YAML as the project reads it: PyYAML's safe loader in its C form (libyaml).

The pure-Python loader cost every process that reads the cited files (about 150 kB) a second:
each pipeline stage and each test worker before its first test. libyaml accepts the same safe
subset and builds the same data (compared on every YAML file of the repository); its errors are
the same :class:`yaml.YAMLError`, though some messages are worded differently. A PyYAML built
without libyaml (no wheel for the platform) falls back to the pure-Python loader.
"""

from __future__ import annotations

from typing import Any

import yaml

YAMLError = yaml.YAMLError

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """The data of one YAML document (``yaml.safe_load``, parsed by libyaml)."""
    return yaml.load(text, Loader=_LOADER)
