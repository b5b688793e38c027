"""Test-wide settings: jax on CPU, deterministic hypothesis profile by default."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Op-level tests check the reference interpreter, the semantics oracle; the cpu backend has its
# own suites that name it (tests/unit/backends, test_cpu_vs_interpreter, the conformance and JAX
# program suites on cpu).
os.environ.setdefault("XLAPY_BACKEND", "interpreter")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


def pytest_terminal_summary(terminalreporter: object) -> None:
    """Which machine the cpu backend compiled for in this run (the CI matrix sets
    XLAPY_CPU_TARGET to test lower targets' code paths on this machine); printed under -q."""
    from xlapy.backends.cpu import target

    terminalreporter.write_line(  # type: ignore[attr-defined]
        f"xlapy cpu target: {target.default()} on host {target.host_target().cpu}")
