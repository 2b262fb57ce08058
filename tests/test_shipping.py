"""What travels to cluster workers: the user's modules by value, refusals before any work."""

from __future__ import annotations

import pickle
import shutil
import sys
import textwrap
import uuid
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from dpverify.checks.base import CheckSpec, RunContext
from dpverify.checks.runner import run_checks
from dpverify.core.errors import InputError
from dpverify.core.registry import load_callable
from dpverify.execution import shipping


def _module(folder: Path, stem: str, text: str) -> str:
    name = f"{stem}_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return name


def _forget(folder: Path, *names: str) -> None:
    """This process can no longer import the modules: as on a worker without them."""
    for name in names:
        sys.modules.pop(name, None)
    sys.path[:] = [p for p in sys.path if p != str(folder)]
    shutil.rmtree(folder)


@pytest.fixture
def user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "mycode"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_a_local_module_and_what_it_imports_travel_by_value(user_folder: Path) -> None:
    np.save(user_folder / "w.npy", np.array([2.0, -1.0]))
    helper = _module(user_folder, "helper", """
        from pathlib import Path
        import numpy as np
        W = np.load(Path(__file__).with_name("w.npy"))  # read when imported

        def scale(x):
            return x @ W
    """)
    mech = _module(user_folder, "mech", f"""
        import numpy as np
        from {helper} import scale

        def f(data, rng, trials):
            return scale(np.asarray(data)) + rng.normal(size=(trials, 1))
    """)
    fn = load_callable(f"{mech}:f")
    expected = fn(np.ones(2), np.random.default_rng(0), 3)
    before = cloudpickle.list_registry_pickle_by_value()
    payload = shipping.dumps(fn)
    by_reference = cloudpickle.dumps(fn)
    assert cloudpickle.list_registry_pickle_by_value() == before  # registrations undone
    _forget(user_folder, mech, helper)
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(by_reference)  # what a worker without the module would see
    got = shipping.loads(payload)(np.ones(2), np.random.default_rng(0), 3)
    np.testing.assert_array_equal(got, expected)


def test_installed_packages_go_by_reference() -> None:
    from dpverify.core.registry import resolve

    assert len(shipping.dumps(resolve)) < 200  # a name to import, not the code
    assert shipping.loads(shipping.dumps(np.mean)) is np.mean


def test_a_compiled_extension_beside_the_users_code_is_refused(user_folder: Path) -> None:
    import _bisect

    if not getattr(_bisect, "__file__", None):
        pytest.skip("_bisect is built into this interpreter")
    pkg = f"fastpkg_{uuid.uuid4().hex[:8]}"
    (user_folder / pkg).mkdir()
    (user_folder / pkg / "__init__.py").write_text("")
    shutil.copy(_bisect.__file__, user_folder / pkg)  # a real extension module, local
    mech = _module(user_folder, "extmech", f"""
        from {pkg} import _bisect

        def f(data, rng, trials):
            return _bisect.bisect_left([0, 1], data) + rng.normal(size=(trials, 1))
    """)
    with pytest.raises(InputError, match=rf"'{pkg}._bisect' .*compiled extension.*Fix: "
                                         r"install"):
        shipping.dumps(load_callable(f"{mech}:f"), "the block function")


def test_module_state_that_cannot_be_pickled_is_named(user_folder: Path) -> None:
    mech = _module(user_folder, "lockmech", """
        import threading
        LOCK = threading.Lock()

        def f(data, rng, trials):
            with LOCK:
                return rng.normal(size=(trials, 1))
    """)
    with pytest.raises(InputError, match=rf"{mech}\.LOCK .*cannot be pickled.*Fix: create"):
        shipping.dumps(load_callable(f"{mech}:f"), "the block function")


def test_a_bundle_makes_the_checks_modules_importable_while_installed(
        user_folder: Path) -> None:
    mech = _module(user_folder, "mech", """
        def f(data, rng, trials):
            return 41 + 1
    """)
    path = user_folder / "by_path.py"
    path.write_text("def g():\n    return 'file'\n")
    specs = shipping.callable_specs([f"{mech}:f", {"neighbours": f"outlier,{path}:g"},
                                     "noisy_gd:sound", "math:sqrt", 0.5])
    assert specs == [f"{mech}:f", f"{path}:g", "noisy_gd:sound", "math:sqrt"]
    bundle = shipping.bundle_for(specs)
    assert bundle.names() == [mech, str(path)]  # neither registered nor installed code
    payload = shipping.dumps(bundle)
    _forget(user_folder, mech)
    with pytest.raises(InputError):
        load_callable(f"{mech}:f")
    shipped = shipping.loads(payload)
    with shipping.installed(shipped), shipping.installed(shipped):
        assert load_callable(f"{mech}:f")(None, None, 1) == 42
        assert load_callable(f"{path}:g")() == "file"
    assert mech not in sys.modules  # gone with the last task that held it
    with pytest.raises(InputError, match="no file"):
        load_callable(f"{path}:g")


def test_environments_compare_by_package_and_name_both_versions() -> None:
    here = {"python": "3.11", "numpy": "2.4.6", "torch": "2.13.0", "cloudpickle": "3.1.3"}
    same = dict(here)
    shipping.compare_environments(here, {"tcp://a:1": same,
                                         "tcp://b:1": {**same, "torch": None}})
    with pytest.raises(InputError, match=r"cloudpickle differs on the Dask worker tcp://b:1: "
                                         r"3\.1\.3 here, 2\.2\.1 there"):
        shipping.compare_environments(here, {"tcp://a:1": same,
                                             "tcp://b:1": {**same, "cloudpickle": "2.2.1"}})
    with pytest.raises(InputError, match="cannot report its environment.*dpverify installed"):
        shipping.compare_environments(here, {"tcp://a:1": ModuleNotFoundError("dpverify")})


class _FakeClient:
    """The few client calls check_workers makes, for workers that differ in numpy."""

    def __init__(self, numpy_version: str) -> None:
        self.numpy_version = numpy_version
        self.asked: list[list[str]] = []

    def wait_for_workers(self, n: int, timeout: float) -> None:
        pass

    def nthreads(self) -> dict[str, int]:
        return {"tcp://w:1": 1}

    def run(self, fn, workers, on_error):
        self.asked.append(workers)
        return {w: {**fn(), "numpy": self.numpy_version} for w in workers}


def test_workers_are_checked_once_each_and_a_mismatch_stops_the_run() -> None:
    ok = _FakeClient(np.__version__)
    shipping.check_workers(ok)
    shipping.check_workers(ok)
    assert ok.asked == [["tcp://w:1"]]
    with pytest.raises(InputError, match=rf"numpy differs .*: {np.__version__} here, 1\.0 "):
        shipping.check_workers(_FakeClient("1.0"))


def test_jobs_and_a_cluster_do_not_mix() -> None:
    spec = CheckSpec("a", "account", "noisy_gd:sound", params={"T": 3})
    with pytest.raises(InputError, match="--jobs 2 runs checks in local processes"):
        run_checks([(spec, RunContext(executor="dask"))], jobs=2)
