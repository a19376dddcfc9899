"""Session.harness_kernel loads each harness source once and keys its kernels by (source, entry).

Runs on the CPU: the build and the driver's Module are stand-ins that count what is made."""

from gemm_driver import session as session_module
from gemm_driver.session import Session


class FakeModule:
    made: list = []

    def __init__(self, cubin, name):
        self.name = name
        FakeModule.made.append(name)

    def kernel(self, entry, signature):
        return (self.name, entry, signature)


class FakeContext:
    def make_current(self):
        pass


def bare_session(monkeypatch):
    monkeypatch.setattr(session_module, "Module", FakeModule)
    monkeypatch.setattr(session_module.cache, "build", lambda **kw: (type("C", (), {"cubin": b""})(), None))
    monkeypatch.setattr(session_module, "read_source", lambda source: "")
    monkeypatch.setattr(session_module, "included_headers", lambda source: {})
    FakeModule.made = []
    made = object.__new__(Session)
    made.context, made.device = FakeContext(), type("D", (), {"arch": "sm_90a"})()
    made._harness_modules, made._harness, made._modules = {}, {}, []
    return made


def test_two_entries_of_one_source_share_one_module(monkeypatch):
    s = bare_session(monkeypatch)
    first = s.harness_kernel("cu/harness/x.cu", "one", ("ptr",))
    second = s.harness_kernel("cu/harness/x.cu", "two", ("ptr",))
    assert first == ("cu/harness/x.cu", "one", ("ptr",)) and second[1] == "two"
    assert FakeModule.made == ["cu/harness/x.cu"]
    assert s.harness_kernel("cu/harness/x.cu", "one", ("ptr",)) is first


def test_the_same_entry_name_in_two_sources_gives_two_kernels(monkeypatch):
    s = bare_session(monkeypatch)
    first = s.harness_kernel("cu/harness/x.cu", "check", ("ptr",))
    second = s.harness_kernel("cu/harness/y.cu", "check", ("ptr",))
    assert first[0] == "cu/harness/x.cu" and second[0] == "cu/harness/y.cu"
    assert FakeModule.made == ["cu/harness/x.cu", "cu/harness/y.cu"]
