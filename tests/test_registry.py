"""The kernel registry and KernelSpec rules, checked without a GPU."""

from __future__ import annotations

import re

import pytest

from gemm_driver import kernels
from gemm_driver.kernels.sources import source_root
from gemm_driver.kernels.spec import MAX_GRID, MAX_THREADS_PER_BLOCK, KernelSpec, Tunable
from gemm_driver.problem import GemmProblem


def all_tunable_sets(spec):
    return spec.configurations()


def test_names_are_unique_across_kernels_and_providers():
    names = [s.name for s in kernels.SPECS] + [p.name for p in kernels.PROVIDERS]
    assert len(names) == len(set(names))
    assert set(kernels.ALL) == set(names)
    assert {"cublas", "numpy", "naive", "coalesced", "smem_tiled", "ptx_naive"} <= set(names)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names), "names are used on the command line"


def test_every_source_exists_and_declares_its_entry():
    for spec in kernels.KERNELS.values():
        path = source_root() / spec.source
        assert path.is_file(), f"{spec.name}: {spec.source} is missing"
        text = path.read_text()
        base_entry = spec.entry.split("<")[0]
        assert base_entry in text, f"{spec.name}: entry {base_entry} not in {spec.source}"
        assert text.lstrip().startswith("//"), f"{spec.source} should open with a comment saying what it changes"


def test_tunables_are_well_formed():
    for spec in kernels.KERNELS.values():
        names = [t.name for t in spec.tunables]
        assert len(names) == len(set(names))
        placeholders = set(re.findall(r"\{(\w+)\}", spec.entry))
        if spec.launch_recipe is None:
            assert placeholders == set(names), f"{spec.name}: entry placeholders must be exactly the tunables"
        else:  # a launch recipe may pass tunables as run-time arguments (group size, splits)
            assert placeholders <= set(names), f"{spec.name}: entry placeholders must be tunables"
        for t in spec.tunables:
            assert t.default in t.choices, f"{spec.name}.{t.name} default not allowed"
            assert len(set(t.choices)) == len(t.choices) and t.help


def test_every_tunable_set_has_a_legal_block():
    for spec in kernels.KERNELS.values():
        for tunables in all_tunable_sets(spec):
            problem = spec.probe(300, 200, 100, tunables)  # the FP32 GEMM, or a variant the kernel computes (FP8)
            resolved = spec.validate(problem, tunables)
            assert resolved == {**spec.resolve(), **tunables}
            block = spec.block(resolved)
            assert 1 <= block[0] * block[1] * block[2] <= MAX_THREADS_PER_BLOCK
            grid = spec.grid(problem, resolved)
            assert all(g >= 1 for g in grid)
            assert spec.dynamic_smem(resolved) >= 0


def _per_block(spec, tunables, dim):
    """Rows (dim='m') or columns (dim='n') of C that one block covers, from the spec's geometry."""
    axis = _axis_for(spec, dim)
    for v in range(1, 4097):
        shape = {"m": 1, "n": 1, "k": 1, dim: v + 1}
        if spec.grid(GemmProblem(**shape), tunables)[axis] > 1:
            return v
    raise AssertionError("no block boundary below 4096")


def test_grid_covers_c_without_idle_blocks():
    """Per axis: enough blocks to cover M (or N), and not one block more."""
    for m, n in [(1, 1), (31, 33), (32, 64), (257, 129)]:
        p = GemmProblem(m, n, 7)
        for spec in kernels.KERNELS.values():
            if spec.arch_specific:  # persistent 1-D grids and a producer warpgroup: tests/test_hopper_specs.py
                continue
            for t in all_tunable_sets(spec):
                grid = spec.grid(p, t)
                for dim, extent in (("m", m), ("n", n)):
                    per, axis = _per_block(spec, t, dim), _axis_for(spec, dim)
                    assert grid[axis] * per >= extent > (grid[axis] - 1) * per, (spec.name, t, dim)
                block = spec.block(t)
                # every thread owns the same whole number of C elements (1 up to the register-blocked rungs)
                area = _per_block(spec, t, "m") * _per_block(spec, t, "n")
                assert area % (block[0] * block[1] * block[2]) == 0, (spec.name, t)


def test_get():
    assert kernels.get("naive") is kernels.KERNELS["naive"]
    assert kernels.get("cublas").kind == "library"
    with pytest.raises(ValueError, match=r"^unknown kernel 'nope' \(`list` shows all\)$"):
        kernels.get("nope")
    with pytest.raises(ValueError, match=r"^unknown kernel 'hoper_bf16'; did you mean hopper_bf16, hopper_fp16, "
                                         r"\w+\? \(`list` shows all\)$"):
        kernels.get("hoper_bf16")


# --- validate / resolve ---------------------------------------------------------------
def test_unknown_tunable_names_it_and_the_known_ones():
    spec = kernels.KERNELS["smem_tiled"]
    with pytest.raises(ValueError, match=r"kernel 'smem_tiled' has no tunable 'BLOCK'; its tunables: TILE, PAD"):
        spec.validate(GemmProblem(8, 8, 8), {"BLOCK": 16})
    with pytest.raises(ValueError, match=r"kernel 'naive' has no tunable 'TILE'; its tunables: none"):
        kernels.KERNELS["naive"].resolve({"TILE": 16})


@pytest.mark.parametrize("value", [3, 64, -16, 0, 16.0, "16", True, None])
def test_disallowed_value_names_the_tunable_and_the_choices(value):
    spec = kernels.KERNELS["smem_tiled"]
    with pytest.raises(ValueError) as info:
        spec.validate(GemmProblem(8, 8, 8), {"TILE": value})
    assert str(info.value) == f"smem_tiled: TILE={value!r} is not allowed; choose one of [16, 32]"


def test_bool_is_not_an_int_here():
    with pytest.raises(ValueError, match=r"PAD=True is not allowed; choose one of \[0, 1\]"):
        kernels.KERNELS["smem_tiled"].resolve({"PAD": True})


def test_defaults_and_overrides():
    spec = kernels.KERNELS["smem_tiled"]
    assert spec.resolve() == {"TILE": 32, "PAD": 0}
    assert spec.resolve({"PAD": 1}) == {"TILE": 32, "PAD": 1}
    assert spec.name_expression(spec.resolve({"TILE": 16})) == "sgemm_smem_tiled<16, 0>"
    assert kernels.KERNELS["coalesced"].name_expression({"BLOCK": 8}) == "sgemm_coalesced<8>"


def _axis_for(spec, dim):
    """Which grid axis grows with M (dim='m') or N (dim='n') for this spec."""
    t = spec.resolve()
    small = spec.grid(GemmProblem(1, 1, 1), t)
    big = spec.grid(GemmProblem(10_000 if dim == "m" else 1, 10_000 if dim == "n" else 1, 1), t)
    (axis,) = [i for i in range(3) if big[i] != small[i]]
    return axis


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
@pytest.mark.parametrize("dim", ["m", "n"])
def test_grid_limit_names_the_limit(name, dim):
    spec = kernels.KERNELS[name]
    tunables = spec.resolve()
    axis = _axis_for(spec, dim)
    limit = MAX_GRID[axis]
    # the largest extent whose grid fits, found from the spec's own geometry
    per_block = _per_block(spec, tunables, dim)  # rows (or columns) of C per block along that axis
    fits = min(limit * per_block, 2**31 - 1)
    shape = dict(m=1, n=1, k=1)
    shape[dim] = fits
    spec.validate(spec.probe(**shape, tunables=tunables), tunables)  # at the limit: fine
    if limit * per_block >= 2**31 - 1:
        return  # this axis cannot overflow before the 2^31 - 1 element limit does
    shape[dim] = fits + 1
    problem = spec.probe(**shape, tunables=tunables)
    with pytest.raises(ValueError) as info:
        spec.validate(problem, tunables)
    message = str(info.value)
    assert f"needs {limit + 1} blocks along grid axis {'xyz'[axis]}; the limit is {limit}" in message
    assert message.startswith(f"{name}: problem {problem.label}")


def test_grid_limit_is_reachable_for_m_and_for_n():
    """Not vacuous: some spec overflows grid y through M, another through N."""
    axes = {(name, dim): _axis_for(spec, dim) for name, spec in kernels.KERNELS.items() for dim in "mn"}
    assert axes[("coalesced", "m")] == 1 and axes[("smem_tiled", "m")] == 1
    assert axes[("naive", "n")] == 1 and axes[("ptx_naive", "n")] == 1
    with pytest.raises(ValueError, match="the limit is 65535"):
        kernels.KERNELS["coalesced"].validate(GemmProblem(65535 * 32 + 1, 1, 1))
    with pytest.raises(ValueError, match="the limit is 65535"):
        kernels.KERNELS["naive"].validate(GemmProblem(1, 65535 * 32 + 1, 1))
    kernels.KERNELS["naive"].validate(GemmProblem(65535 * 32 + 1, 1, 1))  # M is on x for naive


def test_empty_problems_skip_the_grid_rule():
    spec = kernels.KERNELS["coalesced"]
    spec.validate(GemmProblem(65535 * 32 + 1, 0, 1))
    spec.validate(GemmProblem(0, 0, 0))


def _toy(**changes):
    base = dict(name="toy", description="toy", source="cu/simt/naive.cu", entry="toy",
                block=lambda t: (32, 32, 1), grid=lambda p, t: (1, 1, 1))
    return KernelSpec(**{**base, **changes})


def test_threads_per_block_rule():
    spec = _toy(block=lambda t: (64, 32, 1))
    with pytest.raises(ValueError, match=r"toy: 2048 threads per block; at most 1024"):
        spec.validate(GemmProblem(4, 4, 4))


def test_custom_rules_are_named():
    rule = lambda p, t: f"K must be a multiple of {t['X']}" if p.k % t["X"] else None
    spec = _toy(tunables=(Tunable("X", 4, (4, 8), "step"),), rules=(rule,))
    spec.validate(GemmProblem(4, 4, 8), {"X": 8})
    with pytest.raises(ValueError, match=r"^toy: K must be a multiple of 8$"):
        spec.validate(GemmProblem(4, 4, 12), {"X": 8})


def test_check_device():
    spec = kernels.KERNELS["naive"]
    spec.check_device((7, 5))
    spec.check_device((9, 0))
    with pytest.raises(ValueError, match=r"naive needs sm_75 or newer; this GPU is sm_70"):
        spec.check_device((7, 0))


def test_kinds_and_min_arch():
    assert kernels.KERNELS["ptx_naive"].kind == "ptx"
    assert kernels.KERNELS["naive"].kind == "cu"
    assert kernels.KERNELS["naive"].min_arch == "sm_75"
    assert kernels.get("numpy").min_arch == "-"
    assert kernels.get("cublas").min_arch == "sm_50"


def test_signature_matches_the_c_declaration():
    """Each .cu entry declares exactly the argument list of SGEMM_SIGNATURE, in order."""
    c_for = {"int": "int", "float": "float", "ptr": "float*", "tensormap": "__grid_constant__hopper::TensorMap"}
    for spec in kernels.KERNELS.values():
        if spec.kind != "cu":
            continue
        text = (source_root() / spec.source).read_text()
        base = spec.entry.split("<")[0]
        params = re.search(re.escape(base) + r"\s*\(([^)]*)\)", text, re.S).group(1)
        declared = [re.sub(r"\b(?:__restrict__|const)\b|\s+", " ", p).split()[:-1] for p in params.split(",")]
        declared = ["".join(d) for d in declared]
        # "ptr" is any device pointer: float* for the matrices, unsigned* for split-K's counters
        wanted = [c_for[t] for t in spec.signature]
        assert len(declared) == len(wanted), spec.name
        for have, want in zip(declared, wanted):
            assert have == want or (want == "float*" and have.endswith("*")), (spec.name, have, want)


def test_ptx_entry_parameters_match_the_signature():
    spec = kernels.KERNELS["ptx_naive"]
    text = (source_root() / spec.source).read_text()
    params = re.search(re.escape(spec.entry) + r"\s*\(([^)]*)\)", text, re.S).group(1)
    kinds = re.findall(r"\.param\s+\.(\w+)", params)
    ptx_for = {"int": "u32", "float": "f32", "ptr": "u64"}
    assert kinds == [ptx_for[t] for t in spec.signature]


def test_split_k_scratch_covers_whole_tiles_and_one_counter_per_tile():
    from gemm_driver.kernels.simt.warptiling import scratch_bytes

    spec = kernels.KERNELS["warptiled"]
    t = spec.resolve({"BM": 128, "BN": 128, "WN": 32, "TN": 8, "SPLITK": 3})
    assert scratch_bytes(GemmProblem(300, 200, 99), t) == (4 * 3 * 384 * 256, 4 * 3 * 2)
    assert scratch_bytes(GemmProblem(300, 200, 99), spec.resolve()) == (0, 0)
    assert spec.grid(GemmProblem(300, 200, 99), t) == (2, 3, 3)


def test_cupy_baseline_is_registered_and_says_why_when_absent(monkeypatch):
    import builtins

    from gemm_driver.kernels import providers

    assert kernels.get("cupy").kind == "library" and kernels.get("cupy").precision == "fp32"
    real_import = builtins.__import__

    def no_cupy(name, *args, **kwargs):
        if name == "cupy":
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cupy)
    assert "CuPy is not usable here (ImportError: No module named 'cupy')" == providers.cupy_unavailable()
    assert kernels.absent_baselines()["cupy"] == providers.cupy_unavailable()  # torch may be absent too
    cupy = kernels.get("cupy")
    with pytest.raises(ValueError, match="CuPy is not usable here"):
        cupy.launcher(cupy, None, GemmProblem(2, 2, 2), None, None, None)


def test_shared_memory_is_checked_against_the_gpus_own_limit():
    """The rules allow the most any GPU gives a block (the table's sm_90 227 KiB); a GPU that
    gives less refuses the kernel when it is loaded, as UnsupportedProblem (a skip)."""
    from gemm_driver.cuda.arch_limits import MAX_SHARED_PER_BLOCK, limits
    from gemm_driver.cuda.errors import UnsupportedProblem

    assert MAX_SHARED_PER_BLOCK == limits("sm_90a").max_shared_per_block == 227 * 1024
    spec = kernels.KERNELS["warptiled"]
    tunables = spec.validate(GemmProblem(256, 256, 256))
    needs = spec.dynamic_smem(tunables)
    spec.check_shared_memory(tunables, needs)  # exactly what it needs: taken
    with pytest.raises(UnsupportedProblem, match=f"warptiled needs {needs} bytes of shared memory per block; "
                                                 f"this GPU gives at most {needs - 1}"):
        spec.check_shared_memory(tunables, needs - 1)
