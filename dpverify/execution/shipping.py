"""A user's own code travels with the work to cluster workers, and the workers are checked.

Targets, pair functions, distinguishers and rate functions given as ``module:function``
usually live in the user's checkout, not in a package installed on every Dask worker.
Pickling them by reference (what ``pickle`` does) would make each worker import a module it
does not have. :func:`dumps` instead sends every module that is *local* (not part of the
standard library or of an installed distribution) by value, through cloudpickle's
``register_pickle_by_value``: the code, and the module-level state it uses (arrays read
from files when the module was imported included), travel with the task. Installed
packages (numpy, torch, dpverify itself) still go by reference and must be installed on
the workers, in the versions :func:`check_workers` compares with this process's.

What cannot travel is refused before any trial runs, with the module and the fix:

* a compiled extension module outside an installed package (a ``.so``/``.pyd`` beside the
  user's code);
* module-level state that cannot be pickled (an open file, a lock, a connection).

A whole check sent to a worker needs its modules importable by name there, not only the
functions a closure refers to: :func:`bundle_for` gathers the local modules that a check's
``module:function`` strings name, and :func:`installed` puts them in the worker's
``sys.modules`` (and a ``.py`` file's module where :func:`dpverify.core.registry.load_callable`
finds it) while the check runs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import io
import json
import os
import pickle
import re
import sys
import sysconfig
import threading
import types
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle

from dpverify.core import registry
from dpverify.core.errors import InputError

# Versions that can change a run's results (or make shipped code unreadable), compared
# between this process and every worker: random streams (numpy), statistics (scipy),
# accountants (dp-accounting), the torch backend, the pickle format of shipped code
# (cloudpickle) and the bytecode of shipped functions (Python's minor version).
RESULT_PACKAGES = ("numpy", "scipy", "dp-accounting", "torch", "cloudpickle")
# Compared only when both sides have them: a worker without torch cannot give a different
# torch result, it fails loudly on a torch run.
OPTIONAL_PACKAGES = frozenset({"torch"})

# dpverify's own packages always go by reference, installed or on PYTHONPATH: every worker
# has them, in the same code (check_workers).
_OWN = frozenset({"dpverify", "algorithms"})
_LOCK = threading.RLock()
_SPEC_RE = re.compile(r"^(?:[A-Za-z_][\w.]*|.+\.py):[A-Za-z_][\w.]*$")


# --------------------------------------------------------------------------------------
# Which modules are local


@functools.lru_cache(maxsize=1)
def _editable_tops() -> frozenset[str]:
    """Top-level import names of distributions installed in editable mode (``pip install
    -e``): their files live outside site-packages, yet they are installed packages.

    Reading each distribution's small ``direct_url.json`` takes milliseconds, where
    ``importlib.metadata.packages_distributions`` reads every file list (a second).
    """
    tops: set[str] = set()
    for dist in importlib.metadata.distributions():
        try:
            url = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        if url.get("dir_info", {}).get("editable"):
            names = (dist.read_text("top_level.txt") or "").split()
            tops.update(names or [re.sub(r"[-.]+", "_", dist.metadata["Name"]).lower()])
    return frozenset(tops)


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[str, ...]:
    import site

    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # virtualenv's old site module
        paths.update(site.getsitepackages())
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


@functools.lru_cache(maxsize=4096)
def _is_local_name(name: str, file: str) -> bool:
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top in _OWN or top in _editable_tops():
        return False
    return not os.path.realpath(file).startswith(_installed_roots())


def is_local_module(module: types.ModuleType) -> bool:
    """Whether ``module`` is the user's own code (not stdlib, not an installed package).

    Examples
    --------
    >>> import json, numpy, dpverify.execution.shipping as s
    >>> s.is_local_module(json), s.is_local_module(numpy), s.is_local_module(s)
    (False, False, False)
    """
    file = getattr(module, "__file__", None)
    if not file or module.__name__ == "__main__":  # built-in, namespace, or cloudpickle's own
        return False
    return _is_local_name(module.__name__, file)


def is_extension(module: types.ModuleType) -> bool:
    """Whether ``module`` was loaded from a compiled extension (``.so``, ``.pyd``).

    Examples
    --------
    >>> import json
    >>> is_extension(json)
    False
    """
    if isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader):
        return True
    file = str(getattr(module, "__file__", "") or "")
    return file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def _module_of(obj: Any) -> types.ModuleType | None:
    if isinstance(obj, types.ModuleType):
        return obj
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
        return sys.modules.get(getattr(obj, "__module__", None) or "")
    return None


def _extension_error(module: types.ModuleType) -> InputError:
    return InputError(
        f"module {module.__name__!r} ({module.__file__}) is a compiled extension: compiled "
        "code cannot be sent to Dask workers. Fix: install the package that builds it on "
        "every worker (pip install ...), or run with --executor local")


# --------------------------------------------------------------------------------------
# Pickling by value


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, with every local module met on the way registered by value."""

    def __init__(self, file: io.BytesIO, registered: list[types.ModuleType]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._registered = registered

    def reducer_override(self, obj: Any) -> Any:
        module = _module_of(obj)
        # A module not in sys.modules (a `.py` file loaded by path) goes by value anyway.
        if module is not None and sys.modules.get(module.__name__) is module \
                and is_local_module(module):
            if is_extension(module):
                raise _extension_error(module)
            if module.__name__ not in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.register_pickle_by_value(module)
                self._registered.append(module)
        return super().reducer_override(obj)


def dumps(obj: Any, what: str = "the work") -> bytes:
    """Pickle ``obj`` for a cluster worker, local modules by value.

    Raises :class:`InputError` naming the module (and the object) that cannot travel.

    Examples
    --------
    >>> import numpy as np
    >>> loads(dumps(np.arange(3))).tolist()
    [0, 1, 2]
    """
    buf = io.BytesIO()
    registered: list[types.ModuleType] = []
    with _LOCK:
        try:
            _Pickler(buf, registered).dump(obj)
        except InputError:
            raise
        except Exception as e:
            raise _unpicklable_error(what, e, registered) from None
        finally:
            for module in registered:
                cloudpickle.unregister_pickle_by_value(module)
    return buf.getvalue()


def loads(payload: bytes) -> Any:
    """Unpickle what :func:`dumps` made (cloudpickle output is plain pickle to read).

    Examples
    --------
    >>> loads(dumps({"a": 1}))
    {'a': 1}
    """
    return pickle.loads(payload)


def _unpicklable_error(what: str, error: Exception,
                       modules: list[types.ModuleType]) -> InputError:
    culprit = ""
    for module in modules:
        name = _unpicklable_attribute(module)
        if name is not None:
            culprit = (f" {module.__name__}.{name} (in {module.__file__}) is what cannot be "
                       "pickled.")
            break
    return InputError(
        f"{what} cannot be sent to the Dask workers: {type(error).__name__}: {error}."
        f"{culprit} Fix: create such objects (open files, locks, connections) inside the "
        "function that uses them rather than at module level, install the module on every "
        "worker, or run with --executor local")


def _unpicklable_attribute(module: types.ModuleType) -> str | None:
    for name, value in vars(module).items():
        if name.startswith("__") or isinstance(value, types.ModuleType):
            continue
        try:
            cloudpickle.dumps(value)
        except Exception:
            return name
    return None


# --------------------------------------------------------------------------------------
# Whole modules for checks that run on a worker


@dataclass
class CodeBundle:
    """The user's modules a check names, to install on the worker that runs it.

    ``modules`` by import name; ``files`` by the ``.py`` path as the check gives it.
    """

    modules: dict[str, types.ModuleType] = field(default_factory=dict)
    files: dict[str, types.ModuleType] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.modules or self.files)

    def names(self) -> list[str]:
        return sorted(self.modules) + sorted(self.files)


def callable_specs(values: Iterable[Any]) -> list[str]:
    """Strings among ``values`` (nested in dicts, lists, comma-separated) shaped like
    ``module:function``.

    Examples
    --------
    >>> callable_specs(["noisy_gd:sound", {"neighbours": "outlier,mymod:pair"}, 3])
    ['noisy_gd:sound', 'mymod:pair']
    """
    out: list[str] = []
    for v in values:
        if isinstance(v, str):
            out += [s.strip() for s in v.split(",") if _SPEC_RE.match(s.strip())]
        elif isinstance(v, Mapping):
            out += callable_specs(v.values())
        elif isinstance(v, (list, tuple)):
            out += callable_specs(v)
    return list(dict.fromkeys(out))


def bundle_for(specs: Iterable[str]) -> CodeBundle:
    """The local modules of the ``module:function`` strings in ``specs``, imported here.

    Registered targets and installed modules are left out; a string that does not import
    is left for the check to report in its own words.

    Examples
    --------
    >>> bundle_for(["noisy_gd:sound", "math:sqrt"]).names()
    []
    """
    bundle = CodeBundle()
    for spec in specs:
        if registry.is_registered_target(spec):
            continue
        mod_name = spec.partition(":")[0]
        try:
            registry.load_callable(spec)
        except InputError:
            continue
        if mod_name.endswith(".py"):
            bundle.files[mod_name] = registry.FILE_MODULES[mod_name]
            continue
        module = sys.modules.get(mod_name)
        if module is not None and is_local_module(module):
            bundle.modules[mod_name] = module
    return bundle


_INSTALLED: dict[tuple[str, str], int] = {}


@contextlib.contextmanager
def installed(bundle: CodeBundle) -> Iterator[None]:
    """The bundle's modules importable by name (and by file) while the block runs.

    Several tasks of one worker may hold the same modules: they stay until the last
    leaves.

    Examples
    --------
    >>> import importlib
    >>> m = types.ModuleType("shipped_demo")
    >>> m.answer = 42
    >>> with installed(CodeBundle(modules={"shipped_demo": m})):
    ...     importlib.import_module("shipped_demo").answer
    42
    >>> "shipped_demo" in sys.modules
    False
    """
    places = ([(sys.modules, ("module", n), n, m) for n, m in bundle.modules.items()]
              + [(registry.SHIPPED_FILES, ("file", p), p, m) for p, m in bundle.files.items()])
    with _LOCK:
        for table, key, name, module in places:
            table[name] = module
            _INSTALLED[key] = _INSTALLED.get(key, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            for table, key, name, module in places:
                _INSTALLED[key] -= 1
                if _INSTALLED[key] == 0:
                    del _INSTALLED[key]
                    if table.get(name) is module:
                        del table[name]


# --------------------------------------------------------------------------------------
# The workers' environment


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """SHA-256 (12 hex digits) of the Python sources of dpverify and its algorithms.

    An editable checkout keeps its version number while its code changes; this tells two
    checkouts apart.

    Examples
    --------
    >>> len(source_fingerprint())
    12
    """
    h = hashlib.sha256()
    for pkg in sorted(_OWN):
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        for f in sorted(root.rglob("*.py")):
            h.update(f"{pkg}/{f.relative_to(root).as_posix()}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def environment() -> dict[str, str | None]:
    """What a worker must share with the client for results to be the same.

    Examples
    --------
    >>> sorted(environment())[:3]
    ['cloudpickle', 'dp-accounting', 'dpverify']
    """
    env: dict[str, str | None] = {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "dpverify": f"{_version('dpverify')} (source {source_fingerprint()})",
    }
    env.update({pkg: _version(pkg) for pkg in RESULT_PACKAGES})
    return env


def compare_environments(here: Mapping[str, str | None],
                         workers: Mapping[str, Any]) -> None:
    """Raise :class:`InputError` naming the first package whose version differs.

    ``workers`` maps a worker's address to its :func:`environment` (or to the exception
    that computing it raised there).

    Examples
    --------
    >>> here = {"numpy": "2.4.6", "torch": "2.13.0"}
    >>> compare_environments(here, {"w1": {"numpy": "2.4.6", "torch": None}})
    >>> try:
    ...     compare_environments(here, {"w1": {"numpy": "2.3.0", "torch": None}})
    ... except InputError as e:
    ...     print(str(e).split(";")[0])
    numpy differs on the Dask worker w1: 2.4.6 here, 2.3.0 there
    """
    for addr, env in sorted(workers.items()):
        if isinstance(env, BaseException):
            raise InputError(f"the Dask worker {addr} cannot report its environment "
                             f"({type(env).__name__}: {env}); is dpverify installed there?")
        for pkg, mine in here.items():
            theirs = env.get(pkg)
            if pkg in OPTIONAL_PACKAGES and (mine is None or theirs is None):
                continue
            if mine != theirs:
                fix = ("install the same dpverify code on the workers as here (and restart "
                       "them)") if pkg == "dpverify" else \
                    f"install {pkg} {mine} on the workers (or the workers' version here)"
                raise InputError(
                    f"{pkg} differs on the Dask worker {addr}: {mine} here, {theirs} there; "
                    f"a different version can change results. Fix: {fix}")


_CHECKED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def check_workers(client: Any, timeout: float = 30.0) -> None:
    """Compare the workers' environment with this process's; raise :class:`InputError`.

    Each worker is checked once per client; one that joins later (or restarts under a new
    address) is checked by the next run. Waits up to ``timeout`` seconds for a first
    worker, so that a scheduler without workers is an error rather than a run that never
    starts.

    Examples
    --------
    >>> import distributed  # doctest: +SKIP
    >>> check_workers(distributed.Client("tcp://127.0.0.1:8786"))  # doctest: +SKIP
    """
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        raise InputError(f"no Dask worker joined the scheduler {client.scheduler.address} "
                         f"within {timeout:g} s; start one with `dask worker "
                         f"{client.scheduler.address}`") from None
    checked = _CHECKED.setdefault(client, set())
    new = sorted(set(client.nthreads()) - checked)
    if new:
        compare_environments(environment(),
                             client.run(environment, workers=new, on_error="return"))
        checked.update(new)
