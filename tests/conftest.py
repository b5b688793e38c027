"""Test-wide settings: jax on CPU, deterministic hypothesis profile by default."""

import os
import sys
from collections.abc import Iterator

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Op-level tests check the reference interpreter, the semantics oracle; the cpu backend has its
# own suites that name it (tests/unit/backends, test_cpu_vs_interpreter, the conformance and JAX
# program suites on cpu).
os.environ.setdefault("XLAPY_BACKEND", "interpreter")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(autouse=True)
def _jax_x64_restored() -> Iterator[None]:
    """A test that switches jax's 64-bit mode (test_xla_math turns it on) leaves it as it
    found it. (A whole-suite run has it on from collection: the differential modules turn
    it on when imported, and the JAX-based unit tests were written with it on.)"""
    jax = sys.modules.get("jax")
    was = bool(jax.config.jax_enable_x64) if jax is not None else False
    yield
    jax = sys.modules.get("jax")
    if jax is not None and bool(jax.config.jax_enable_x64) != was:
        jax.config.update("jax_enable_x64", was)


@pytest.fixture
def jax_x32() -> Iterator[None]:
    """jax's default 32-bit mode for the test, whatever the session has (tests that lower
    f32 programs with Python-float and arange constants: `pytestmark =
    pytest.mark.usefixtures("jax_x32")`)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(False):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`XLAPY_PARAM_STRIDE=N`: of each parametrized test function, every Nth parameter set
    (its first always). `make test`'s lower-target passes set it: they repeat the host's
    suites for another target's code paths, which every test function still reaches, and a
    whole grid each was over half the CI's time on a 2-core Zen 3 (x86-64-v2: 623 s)."""
    stride = int(os.environ.get("XLAPY_PARAM_STRIDE", "1") or 1)
    if stride <= 1:
        return
    seen: dict[tuple[str, str], int] = {}
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is None:
            keep.append(item)
            continue
        key = (item.nodeid.split("::")[0], getattr(item, "originalname", item.name))
        n = seen.get(key, 0)
        seen[key] = n + 1
        (keep if n % stride == 0 else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter: object) -> None:
    """Which machine the cpu backend compiled for in this run (the CI matrix sets
    XLAPY_CPU_TARGET to test lower targets' code paths on this machine); printed under -q."""
    from xlapy.backends.cpu import target

    terminalreporter.write_line(  # type: ignore[attr-defined]
        f"xlapy cpu target: {target.default()} on host {target.host_target().cpu}")
