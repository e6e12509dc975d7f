"""Look instead of read: a trajectory viewer (``turngym view``) and run reports (``turngym report``).

``write_report(path)`` is the one call trainers and ``turngym eval`` make at the end of a run.
"""

from __future__ import annotations

from turngym.viewer.report import write_report

__all__ = ["write_report"]
