"""run_case's classification without a GPU: a launcher that refuses the problem is "skipped",
any other error while the launcher is made is "FAILED" under its type, a compile error is
left to the caller (it names it "compile failed")."""

from __future__ import annotations

import pytest

from gemm_driver.case import PreparedCase, run_case
from gemm_driver.cuda.errors import GemmDriverError, NvrtcError, UnsupportedProblem
from gemm_driver.problem import GemmProblem


class RaisingSession:
    """Stands in for a Session whose launcher raises ``error``."""

    def __init__(self, error: BaseException):
        self.error = error

    def launcher(self, *args, **kwargs):
        raise self.error


def outcome_of(error: BaseException):
    problem = GemmProblem(8, 8, 8)
    with PreparedCase.random(problem, "fp32", 0) as case:
        case.device = lambda: (None, None, None)  # no GPU: the launcher never reads them
        return run_case(RaisingSession(error), "naive", case)


def test_a_refused_problem_is_skipped_with_its_reason():
    outcome = outcome_of(UnsupportedProblem("naive: K must be a multiple of 4"))
    assert (outcome.status, outcome.detail) == ("skipped", "naive: K must be a multiple of 4")


def test_a_plain_value_error_from_a_launcher_is_a_failure_not_a_skip():
    outcome = outcome_of(ValueError("negative grid"))
    assert (outcome.status, outcome.detail) == ("FAILED", "ValueError: negative grid")


@pytest.mark.parametrize("error, detail", [(KeyError("pack"), "KeyError: 'pack'"),
                                           (GemmDriverError("workspace gone\nmore"), "workspace gone")])
def test_any_other_launcher_error_is_a_failure_with_its_first_line(error, detail):
    outcome = outcome_of(error)
    assert (outcome.status, outcome.detail) == ("FAILED", detail)


def test_a_compile_error_reaches_the_caller():
    with pytest.raises(NvrtcError):
        outcome_of(NvrtcError("NVRTC_ERROR_COMPILATION", "failed"))


def test_unsupported_problem_is_a_value_error_for_callers_of_gemm_and_the_cli():
    assert issubclass(UnsupportedProblem, ValueError) and issubclass(UnsupportedProblem, GemmDriverError)
