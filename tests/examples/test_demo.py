from examples import demo


def test_demo_runs_and_checks_its_results(capsys) -> None:  # noqa: ANN001
    demo.main()
    out = capsys.readouterr().out
    assert "fib(20) = 6765" in out and "all results match NumPy" in out
