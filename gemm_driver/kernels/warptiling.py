"""The warptiled rung and its autotuned configuration."""

from __future__ import annotations

SPECS = ()
