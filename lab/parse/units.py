"""The unit of each parsed row, from the patterns a workload declares (``units:`` in
``chapter.yaml``): metric pattern -> unit, the first that matches in file order. A row with no
unit is refused when its boot is parsed, so a new metric cannot reach ``results.csv`` without
saying what it counts."""

from __future__ import annotations

from fnmatch import fnmatchcase

from lab.command import StageError


def unit_of(units: dict[str, str], metric: str) -> str | None:
    """The unit of ``metric`` under ``units`` (``*`` matches across dots too), or None."""
    return next((unit for pattern, unit in units.items() if fnmatchcase(metric, pattern)), None)


def check(rows: list[tuple[str, float]], units: dict[str, str], source: str) -> None:
    """Fail naming every metric of ``rows`` that no pattern of ``units`` matches."""
    missing = sorted({metric for metric, _ in rows if unit_of(units, metric) is None})
    if missing:
        raise StageError(
            f"{source}: no unit for {len(missing)} metric(s), e.g. {missing[:5]}. Fix: add a "
            f"pattern for them to this workload's units: in chapter.yaml (have "
            f"{list(units)})")
