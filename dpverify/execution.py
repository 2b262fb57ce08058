"""Running a target: problems, curators, trials and seeds.

A root seed spawns every stream through ``numpy.random.SeedSequence``: the problem's data
get one child, the trials another, so a check is reproducible from its root seed alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpverify.curator import Curator
from dpverify.data import NeighbourPair
from dpverify.registry import Problem, Target


def seed_streams(seed: int | np.random.SeedSequence, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child streams of a root seed.

    Examples
    --------
    >>> a = seed_streams(0, 2); b = seed_streams(0, 2)
    >>> bool(a[1].generate_state(1)[0] == b[1].generate_state(1)[0])
    True
    """
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return root.spawn(n)


def build_problem(target: Target, params: Mapping[str, Any], seed: int) -> Problem:
    """The target's test problem, its data drawn from the root seed's first child."""
    data_seed = seed_streams(seed, 1)[0]
    return target.algorithm.make_problem(params, np.random.default_rng(data_seed))


def run_target(
    target: Target,
    params: Mapping[str, Any],
    problem: Problem,
    *,
    trials: int,
    rng: int | np.random.Generator | np.random.SeedSequence,
    pair: NeighbourPair | None = None,
    backend: str = "numpy",
    keep_answers: bool = False,
    data_override: Any = None,
) -> tuple[Any, Curator]:
    """Run a variant for ``trials`` trials; on ``pair`` it replays D and D'.

    Returns the output (trials, ...) and the curator holding the ledger.

    Examples
    --------
    >>> from dpverify.registry import resolve
    >>> t = resolve("noisy_gd:sound")
    >>> p = t.algorithm.params("sound", {"T": 3})
    >>> out, cur = run_target(t, p, build_problem(t, p, 0), trials=4, rng=1)
    >>> out.shape[0], len(cur.ledger)
    (4, 3)
    """
    n_public = problem.data.n
    if pair is not None:
        cur = Curator.replay(pair, trials=trials, rng=rng, backend=backend, n_public=n_public,
                             keep_answers=keep_answers)
    else:
        data = data_override if data_override is not None else problem.data
        cur = Curator(data, trials=trials, rng=rng, backend=backend, n_public=n_public,
                      keep_answers=keep_answers)
    out = target.variant.run(cur, problem, params)
    return out, cur


# Trials are cut into blocks of a fixed size, each with its own child of the root seed, so
# results depend only on (root seed, block size), never on how blocks are grouped into
# chunks, how many workers run them, or which executor does.
DEFAULT_BLOCK = 1024


def block_layout(total: int, block_size: int = DEFAULT_BLOCK) -> list[int]:
    """Sizes of the blocks that make up ``total`` trials.

    Examples
    --------
    >>> block_layout(2500, 1000)
    [1000, 1000, 500]
    """
    total = int(total)
    return [min(block_size, total - s) for s in range(0, total, block_size)]


def map_blocks(
    fn: Any,
    total: int,
    *,
    seed: int | np.random.SeedSequence,
    block_size: int = DEFAULT_BLOCK,
) -> list[Any]:
    """Call ``fn(seed_sequence, trials, block_index)`` for every block; results in order.

    Examples
    --------
    >>> out = map_blocks(lambda ss, k, i: np.random.default_rng(ss).random(k), 5, seed=0,
    ...                  block_size=2)
    >>> [len(o) for o in out]
    [2, 2, 1]
    """
    sizes = block_layout(total, block_size)
    seeds = seed_streams(seed, len(sizes))
    return [fn(ss, k, i) for i, (ss, k) in enumerate(zip(seeds, sizes, strict=True))]


def sample_outputs(
    target: Target,
    params: Mapping[str, Any],
    problem: Problem,
    dataset: Any,
    *,
    trials: int,
    seed: int | np.random.SeedSequence,
    backend: str = "numpy",
    block_size: int = DEFAULT_BLOCK,
) -> np.ndarray:
    """Outputs of ``trials`` independent runs on ``dataset``, as a NumPy array (trials, -1).

    Examples
    --------
    >>> from dpverify.registry import resolve
    >>> t = resolve("noisy_gd:sound")
    >>> p = t.algorithm.params("sound", {"T": 2})
    >>> prob = build_problem(t, p, 0)
    >>> sample_outputs(t, p, prob, prob.data, trials=3, seed=1).shape
    (3, 5)
    """

    def block(ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
        cur = Curator(dataset, trials=k, rng=ss, backend=backend, n_public=problem.data.n)
        out = target.variant.run(cur, problem, params)
        return cur.backend.to_numpy(out).reshape(k, -1)

    return np.concatenate(map_blocks(block, trials, seed=seed, block_size=block_size), axis=0)
