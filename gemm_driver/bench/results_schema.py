"""The shape of a bench JSON document, checked field by field before anything reads it.

``compare``, ``plot`` and ``tools/results_table.py`` read saved documents; a field of the
wrong type (a string where a number belongs, a list where an object does) would otherwise
surface as a traceback deep in one of them, after some of their output was written. So
``check`` walks the document once against the specs below and answers with the first
wrong field and its path, e.g. ``results[3].tflops is a string, expected a number or null``.

The specs cover the fields the readers use (bench/compare.py, bench/plots.py,
bench/report.py, bench/roofline.py, tools/results_table.py; ``energy`` is bench/energy.py's),
with the types the writer gives them (bench/1 to bench/3). Fields not listed are not
examined, so a later schema may add fields without older readers refusing the file. Only
the record's identity (kernel, m, n, k, status) is required; the rest may be absent, as
in older files.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping


class SchemaError(ValueError):
    """The first field that does not fit; ``str()`` is one line naming its path."""


def json_type(value: Any) -> str:
    """How a value reads in JSON terms: 'a string', 'an integer', 'null', ..."""
    if value is None:
        return "null"
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
                       (list, "a list"), (dict, "an object")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


class Spec:
    """What one value must be; ``problem`` says in one line how a value misses it, or None."""

    expected = "?"

    def problem(self, value: Any, where: str) -> str | None:
        raise NotImplementedError


class Scalar(Spec):
    def __init__(self, expected: str, kind: Callable[[Any], bool], valid: Callable[[Any], bool] = lambda v: True):
        self.expected, self._kind, self._valid = expected, kind, valid

    def problem(self, value, where):
        if not self._kind(value):
            return f"{where} is {json_type(value)}, expected {self.expected}"
        if not self._valid(value):
            return f"{where} is {value!r}, expected {self.expected}"
        return None


class Nullable(Spec):
    def __init__(self, inner: Spec):
        self.inner, self.expected = inner, f"{inner.expected} or null"

    def problem(self, value, where):
        if value is None:
            return None
        message = self.inner.problem(value, where)
        if message and message.startswith(f"{where} is "):  # the value itself, not a field inside it
            return message.rsplit(", expected ", 1)[0] + f", expected {self.expected}"  # null is fine too
        return message


class ListOf(Spec):
    def __init__(self, item: Spec, what: str = ""):
        self.item, self.expected = item, f"a list of {what or item.expected}"

    def problem(self, value, where):
        if not isinstance(value, list):
            return f"{where} is {json_type(value)}, expected {self.expected}"
        for i, item in enumerate(value):
            if message := self.item.problem(item, f"{where}[{i}]"):
                return message
        return None


class MapOf(Spec):
    """An object whose keys are free (tunable names) and whose values share one spec."""

    def __init__(self, value: Spec, what: str):
        self.value, self.expected = value, what

    def problem(self, value, where):
        if not isinstance(value, dict):
            return f"{where} is {json_type(value)}, expected {self.expected}"
        for key, item in value.items():
            if message := self.value.problem(item, f"{where}.{key}"):
                return message
        return None


class Obj(Spec):
    """An object with known fields: ``required`` must be there, ``optional`` may be."""

    def __init__(self, required: Mapping[str, Spec] = {}, optional: Mapping[str, Spec] = {},
                 what: str = "an object"):
        self.required, self.optional, self.expected = dict(required), dict(optional), what

    def problem(self, value, where):
        if not isinstance(value, dict):
            return f"{where} is {json_type(value)}, expected {self.expected}"
        if missing := [name for name in self.required if name not in value]:
            return f"{where} lacks {', '.join(missing)}"
        for name, spec in (*self.required.items(), *self.optional.items()):
            if name in value and (message := spec.problem(value[name], f"{where}.{name}")):
                return message
        return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


STRING = Scalar("a string", lambda v: isinstance(v, str))
BOOL = Scalar("a boolean", lambda v: isinstance(v, bool))
INT = Scalar("an integer", _is_int)
POSITIVE_INT = Scalar("a positive integer", _is_int, lambda v: v >= 1)
NUMBER = Scalar("a number", _is_number, lambda v: math.isfinite(v))
NON_NEGATIVE = Scalar("a number >= 0", _is_number, lambda v: math.isfinite(v) and v >= 0)
# Times are divided by (compare's speed-up and its range): zero would be a crash, not a result.
MILLISECONDS = Scalar("a number of ms > 0", _is_number, lambda v: math.isfinite(v) and v > 0)
OBJECT = Obj()

CLOCKS = Obj(optional={
    "sagged": Nullable(BOOL), "why": ListOf(STRING, "strings"),
    **{name: Nullable(NUMBER) for name in ("sm_mhz_min", "sm_mhz_max", "mem_mhz_min", "mem_mhz_max",
                                           "temperature_c_max", "power_w_max", "reference_sm_mhz")},
})

TIMING = Obj(
    required={"median_ms": MILLISECONDS},
    optional={
        # compare falls back from the interval (null with few samples) to [p10, p90]
        **{name: MILLISECONDS for name in ("min_ms", "max_ms", "mean_ms", "p10_ms", "p90_ms")},
        **{name: Nullable(MILLISECONDS) for name in ("ci_low_ms", "ci_high_ms")},
        "noise": Nullable(NON_NEGATIVE), "samples": INT, "launches_per_sample": POSITIVE_INT,
        "converged": Nullable(BOOL), "stop_reason": Nullable(STRING), "elapsed_s": Nullable(NON_NEGATIVE),
        "mode": Nullable(STRING), "clock": Nullable(STRING), "clocks": Nullable(CLOCKS),
        "samples_ms": ListOf(NUMBER, "numbers"), "energy_windows": ListOf(OBJECT, "objects"),
    },
)

# bench/energy.py: every number null when no reading was taken, ``trusted`` false then.
ENERGY = Obj(
    required={"trusted": BOOL},
    optional={"joules_per_gemm": Nullable(NON_NEGATIVE), "avg_power_w": Nullable(NON_NEGATIVE),
              "tflops_per_watt": Nullable(NON_NEGATIVE), "window_s": Nullable(NON_NEGATIVE), "note": Nullable(STRING)},
    what="an object (the case's energy reading)",
)

VERIFICATION = Obj(optional={"ok": BOOL, "max_error_ratio": Nullable(NUMBER), "message": Nullable(STRING)})

RECORD = Obj(
    required={"kernel": STRING, "m": POSITIVE_INT, "n": POSITIVE_INT, "k": POSITIVE_INT, "status": STRING},
    optional={
        "batch": POSITIVE_INT, "dtype": Nullable(STRING), "mode": Nullable(STRING), "detail": Nullable(STRING),
        "alpha": NUMBER, "beta": NUMBER, "layout": STRING, "out_dtype": STRING, "epilogue": STRING,
        "scaling": STRING, "fp8_types": STRING,
        "tunables": Nullable(MapOf(INT, "an object of integer tunables")),
        "launch": Nullable(OBJECT), "verification": Nullable(VERIFICATION), "timing": Nullable(TIMING),
        "tflops": Nullable(NON_NEGATIVE), "baseline": Nullable(STRING),
        **{name: Nullable(NUMBER) for name in ("pct_of_cublas", "pct_of_peak", "pct_of_attainable",
                                               "peak_tflops", "attainable_tflops", "clock_mhz",
                                               "speedup_vs_previous")},
        "intensity": NON_NEGATIVE, "previous_rung": Nullable(STRING), "roofline_note": Nullable(STRING),
        "clocks_sagged": Nullable(BOOL), "round_medians_ms": ListOf(NON_NEGATIVE, "numbers"),
        "energy": Nullable(ENERGY), "phases_s": MapOf(NON_NEGATIVE, "an object of seconds by phase"),
    },
    what="an object (one case)",
)

ENVIRONMENT = Obj(optional={"gpu": Obj(optional={"name": STRING})})

SETTINGS = Obj(optional={
    "alpha": NUMBER, "beta": NUMBER, "mode": STRING, "seed": Nullable(INT),
    "kernels": ListOf(STRING, "strings"), "dtypes": ListOf(STRING, "strings"), "rounds": POSITIVE_INT,
})

DOCUMENT = Obj(
    required={"results": ListOf(RECORD, "cases")},
    optional={"environment": ENVIRONMENT, "settings": SETTINGS, "command": OBJECT, "roofline": OBJECT},
)


def check(document: dict) -> None:
    """SchemaError naming the first field of ``document`` that does not fit, else nothing.

    The document's own schema string is the caller's to check (writers.load)."""
    if message := DOCUMENT.problem(document, "document"):
        raise SchemaError(message.removeprefix("document."))
