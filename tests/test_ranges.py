"""Parameter ranges: every numeric parameter of a registered algorithm declares the values
it takes, every value declared anywhere lies in it, and every door refuses one outside
it before any work, naming the parameter, the algorithm and where the value came from."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from typing import Any

import pytest

from dpverify.cli.app import main
from dpverify.core.errors import InputError
from dpverify.core.ranges import COUNT, POSITIVE, PROBABILITY, RATE, SIGN, Range
from dpverify.core.registry import Algorithm, all_algorithms, get_algorithm


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def declared_values(algo: Algorithm) -> Iterator[tuple[str, str, Any]]:
    """(where, key, value) for every parameter value an algorithm declares: defaults,
    scales, variants, and the battery's test sizes and per-check parameters."""
    tables = [("defaults", algo.defaults), ("quick", algo.quick), ("thorough", algo.thorough),
              ("battery", algo.battery.params)]
    for v in algo.variants.values():
        tables.append((f"variant {v.name}", v.params))
        battery = v.battery.over(algo.battery)
        tables.append((f"battery of {v.name}", battery.params))
        for check in battery.checks:
            for cfg in battery.configs(check):
                tables.append((f"battery {check} of {v.name}", cfg.params))
    for where, table in tables:
        for key, value in table.items():
            yield where, key, value


ALGORITHMS = sorted(all_algorithms(), key=lambda a: a.name)


@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda a: a.name)
def test_every_parameter_of_numbers_or_names_declares_its_range(algo: Algorithm) -> None:
    ranged = {k for _, k, v in declared_values(algo) if _number(v) or isinstance(v, str)}
    missing = sorted(k for k in ranged if algo.range_of(k) is None)
    assert not missing, f"{algo.name}: no range declared for {missing}"
    unknown = sorted(set(algo.ranges) - set(algo.defaults))
    assert not unknown, f"{algo.name}: ranges for parameters it does not have: {unknown}"


@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda a: a.name)
def test_every_declared_value_lies_in_its_range(algo: Algorithm) -> None:
    for where, key, value in declared_values(algo):
        span = algo.range_of(key)
        if span is not None and value is not None:
            assert span.contains(value), (algo.name, where, key, value, span.describe())


def test_ranges_read_as_they_are_written() -> None:
    assert [COUNT.contains(v) for v in (1, 5.0, 0, -4, 2.5, math.inf, True)] == [
        True, True, False, False, False, False, False]
    assert not POSITIVE.contains(0) and POSITIVE.contains(1e-9)
    assert not POSITIVE.contains(math.nan) and not POSITIVE.contains(math.inf)
    assert Range(0, infinite=True).contains(math.inf)
    assert PROBABILITY.contains(0) and not PROBABILITY.contains(1)
    assert RATE.contains(1) and not RATE.contains(0)
    assert SIGN.contains(-1) and not SIGN.contains(0) and SIGN.describe() == "one of -1, 1"
    assert Range(0, 1, low_open=True).describe() == "a number in (0, 1]"
    assert Range(high=0, high_open=True).describe() == "a number < 0"
    balanced = Range(0, low_open=True, words=("balanced",))
    assert balanced.contains("balanced") and not balanced.contains("fast")
    assert balanced.describe() == "a number > 0 or 'balanced'"


@pytest.mark.parametrize("key,value,words", [
    ("T", -4, "takes an integer >= 1, got -4"),
    ("n", -3, "takes an integer >= 1, got -3"),
    ("epsilon", math.nan, "takes a number > 0, got nan"),
    ("delta", 1.5, "takes a number in [0, 1), got 1.5"),
    ("eta", math.inf, "got inf"),
    ("clip", 0, "got 0"),
])
def test_an_override_out_of_range_is_refused_by_the_python_api(key: str, value: Any,
                                                               words: str) -> None:
    with pytest.raises(InputError, match="of noisy_gd") as e:
        get_algorithm("noisy_gd").params("sound", {key: value})
    assert f"parameter {key!r}" in str(e.value) and words in str(e.value)


@pytest.mark.parametrize("algo,key,value,words", [
    ("noisy_gd", "loss", "logistics", "one of 'logistic'"),
    ("noisy_gd", "relation", "swap", "one of 'add_remove', 'replace_one'"),
    ("dp_rgda", "phi", "populaton", "one of 'empirical', 'population'"),
    ("kl_spider", "problem", "cubic", "one of 'auto', 'power', 'huber', 'theorem8'"),
    ("o2nc_erm", "beta", "balance", "a number > 0 or 'balanced'"),
])
def test_a_misspelt_name_is_refused_not_read_as_the_default(algo: str, key: str, value: str,
                                                           words: str) -> None:
    # Several algorithms read an unknown name as their default rule (a schedule, phi): a
    # typo would silently run another experiment.
    a = get_algorithm(algo)
    with pytest.raises(InputError, match=f"parameter '{key}' of {algo} takes") as e:
        a.params(next(iter(a.variants)), {key: value})
    assert words in str(e.value) and repr(value) in str(e.value)


def test_a_range_holds_where_the_default_leaves_the_choice_to_the_algorithm() -> None:
    # dp_gd_002 picks its own T by default (None); a number given must still be a count.
    algo = get_algorithm("dp_gd_002")
    assert algo.defaults["T"] is None
    with pytest.raises(InputError, match="parameter 'T' of dp_gd_002 takes an integer >= 1"):
        algo.params("sound", {"T": 0})
    assert algo.params("sound", {"T": None})["T"] is None


@pytest.mark.parametrize("argv", [
    ["audit", "noisy_gd", "--param", "n=-3", "--trials", "100"],
    ["audit", "noisy_gd", "--param", "T=0", "--trials", "100"],
    ["sensitivity", "noisy_gd", "--param", "clip=-1"],
])
def test_the_cli_refuses_a_value_out_of_range_before_any_work(argv: list[str], capsys,
                                                              tmp_path) -> None:
    assert main([*argv, "--json", str(tmp_path / "r.json")]) == 2
    out = capsys.readouterr()
    msg = out.out + out.err
    key = argv[3].split("=")[0]
    assert f"--param {key}: parameter {key!r} of noisy_gd takes" in msg, msg
    assert "Traceback" not in msg and not (tmp_path / "r.json").exists()


def test_a_suite_value_out_of_range_points_at_its_line(tmp_path, capsys) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('[[check]]\nid = "a"\nkind = "account"\ntarget = "noisy_gd:sound"\n'
                     'params = { n = 100 }\n\n[[check]]\nid = "b"\nkind = "account"\n'
                     'target = "noisy_gd:sound"\n[check.params]\nT = -4\n')
    assert main(["run", str(suite), "--report-dir", str(tmp_path / "out")]) == 2
    msg = capsys.readouterr().out
    assert "s.toml:12: parameter 'T' of noisy_gd takes an integer >= 1, got -4" in msg, msg
    assert not (tmp_path / "out").exists()


def test_an_algorithm_without_ranges_is_judged_by_the_values_it_declares() -> None:
    # A user's algorithm that declares no ranges: numbers stay numbers, integers integers,
    # and NaN or infinity is refused unless a declared value is infinite.
    algo = Algorithm("mine", "a user's", "", make_problem=lambda p, rng: None,
                     defaults={"x": 0.5, "k": 3, "cap": math.inf, "rule": None}, variants={})
    algo.check_value("x", 0.25)
    algo.check_value("k", 4)
    algo.check_value("cap", math.inf)
    algo.check_value("rule", "anything")  # a None default: the algorithm's to judge
    finite = "a finite number"
    for key, value, words in (("x", math.nan, finite), ("x", math.inf, finite),
                              ("k", 2.5, "an integer"), ("x", "big", finite)):
        with pytest.raises(InputError, match=f"parameter '{key}' of mine takes {words}"):
            algo.check_value(key, value)


# Rules over several parameters (Algorithm.requires) ------------------------------------


@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda a: a.name)
def test_every_declared_variant_and_scale_meets_the_rules_over_several_parameters(
        algo: Algorithm) -> None:
    for variant in algo.variants:
        for scale in ("quick", "thorough"):
            algo.params(variant, scale=scale)  # raises on a rule the declarations break


@pytest.mark.parametrize("target, overrides, words", [
    ("dp_gd_002:paper", {"setting": "pl", "lam": 0.0}, "the PL schedule needs lam > 0"),
    ("dp_rgda:sound", {"beta": 1.5}, "the cosine saddle needs a > beta^2/mu"),
    ("dp_sgda:sound", {"problem": "matrix_sensing", "phi": "population"},
     "only phi = 'empirical'"),
    ("kl_spider:sound", {"problem": "huber", "kappa": 2.0}, "the huber problem is stated "
     "for kappa = 1"),
    ("adaptive_noisy_gd:sound", {"problem": "auto", "kappa": 3.0},
     "needs an L1-smooth problem; theorem8 at kappa = 3.0"),
    ("prox_point_004:sound", {"problem": "power", "kappa": 1.5, "spread": 3.0},
     "need 0 <= spread < radius"),
    ("dp_double_spider:sound", {"dataset": "digits_st", "minority": 0.7},
     "imratio must be in (0, 0.5]"),
    ("dp_sgd_dro:sound", {"dataset": "digits_st", "n": 1500},
     "digits_st has 901 negatives and 896 positives"),
    ("o2nc_zo:paper", {"n": 300, "T": 301}, "a single pass of T = 301 steps needs at least "
     "301 records at any period Sigma; n = 300"),
    ("o2nc_fo:sound", {"T": 100, "Sigma": 10, "B1": 20}, "needs at least 290 records at "
     "Sigma = 10; n = 200"),
])
def test_a_combination_each_value_allows_but_the_algorithm_refuses_is_refused_up_front(
        target: str, overrides: dict[str, Any], words: str, tmp_path, capsys) -> None:
    name, _, variant = target.partition(":")
    algo = get_algorithm(name)
    for key, value in overrides.items():  # each value alone is in its range
        algo.check_value(key, value)
    with pytest.raises(InputError, match=f"parameters of {name}: ") as e:
        algo.params(variant, overrides)
    assert words in str(e.value)
    # The CLI refuses it before any work, naming the flag.
    argv = ["account", target]
    for key, value in overrides.items():
        argv += ["--param", f"{key}={value}"]
    assert main([*argv, "--json", str(tmp_path / "r.json")]) == 2
    out = capsys.readouterr()
    assert words in out.out + out.err and not (tmp_path / "r.json").exists()


def test_the_digits_st_counts_are_those_of_the_images() -> None:
    from sklearn.datasets import load_digits

    from algorithms.paper000.experiments import DIGITS_ST_CLASSES

    _, digit = load_digits(return_X_y=True)
    assert DIGITS_ST_CLASSES == (int((digit < 5).sum()), int((digit >= 5).sum()))


@pytest.mark.parametrize("target, flags", [
    # The huber problem needs kappa = 1 and the default kappa is 2: either flag alone
    # against the defaults breaks the rule; together they meet it.
    ("kl_spider:sound", ["problem=huber", "kappa=1.0"]),
    # 400 steps need at least 400 records; the test problem has 200 unless n is given.
    ("o2nc_zo:paper", ["n=1000", "T=400"]),
])
def test_the_cli_reads_parameter_flags_together(target: str, flags: list[str],
                                                tmp_path, capsys) -> None:
    argv = ["account", target]
    for flag in flags:
        argv += ["--param", flag]
    assert main([*argv, "--json", str(tmp_path / "r.json")]) in (0, 1)
    assert (tmp_path / "r.json").exists(), capsys.readouterr()


def test_a_combination_the_cli_refuses_names_every_flag_it_read() -> None:
    import argparse

    from dpverify.cli.app import check_params

    with pytest.raises(InputError) as e:
        check_params(argparse.Namespace(target="o2nc_zo:paper", param=["n=300", "T=301"]))
    assert str(e.value).startswith("--param n, --param T: parameters of o2nc_zo: a single "
                                   "pass of T = 301 steps needs at least 301 records"), e.value
    assert str(e.value).endswith("n = 300")
    with pytest.raises(InputError, match="^--param steps: unknown parameter 'steps'"):
        check_params(argparse.Namespace(target="o2nc_zo:paper", param=["steps=3"]))


def test_a_rate_sweep_refuses_a_grid_point_before_any_run(tmp_path, capsys,
                                                          monkeypatch) -> None:
    """The control's sweep pins T = 150, which n = 100 cannot hold in one pass: the
    sweeps are refused before the first point of the first one runs, naming the point."""
    from dpverify.checks.rates import grids

    def no_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a point ran before the grids were checked")

    monkeypatch.setattr(grids, "build_problem", no_run)
    out = tmp_path / "r.json"
    argv = ["rates", "o2nc_zo:paper", "--control", "T=150", "--vary", "n=100,400,800",
            "--seeds", "2", "--json", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr()
    assert ("a point of the control's sweep of o2nc_zo:paper, n = 100, T = 150: parameters "
            "of o2nc_zo: a single pass of T = 150 steps needs at least 150 records"
            ) in err.out + err.err, err
    assert not out.exists()
