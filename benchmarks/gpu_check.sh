#!/usr/bin/env bash
# The checks that need a CUDA device, in one go: the backend agreement tests on CUDA, the
# throughput of each backend measured against NumPy in the same run, the PyTorch-loop audit
# simulated on the device, and paper 001's large-n comparison. Results go to $OUT (or ./gpu-out).
# Wheels of packages the machine may lack are taken from .whl/ when present.
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} OPENBLAS_NUM_THREADS=4
if [ -d .whl ]; then
  $PY -m pip install -q --no-deps --target /tmp/site .whl/*.whl > "$OUT/pip.log" 2>&1
  export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
# The algorithms register through entry points: without an install, declare them from
# pyproject.toml in a .dist-info on the path.
$PY - <<'PY'
import pathlib, tomllib
eps = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]["entry-points"]
d = pathlib.Path("/tmp/site/dpverify-0.dist-info"); d.mkdir(parents=True, exist_ok=True)
(d / "METADATA").write_text("Metadata-Version: 2.1\nName: dpverify\nVersion: 0\n")
(d / "entry_points.txt").write_text("".join(
    f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) for g, items in eps.items()))
PY
export PYTHONPATH=$PYTHONPATH:/tmp/site
$PY - <<'PY' | tee "$OUT/env.txt"
import importlib, sys
print(sys.version.split()[0])
for m in ("numpy", "scipy", "torch", "dp_accounting", "opacus", "pytest", "hypothesis",
          "statsmodels", "matplotlib"):
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:  # noqa: BLE001
        print(m, "MISSING", type(e).__name__)
import torch; print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
PY
step() { local name=$1; shift; local t=$(date +%s); timeout "$1" "${@:2}" > "$OUT/$name.log" 2>&1; echo "$name rc=$? $(( $(date +%s) - t ))s" | tee -a "$OUT/steps.txt"; tail -25 "$OUT/$name.log"; }
step agree_tests 180 $PY -m pytest -q -p no:cacheprovider -o addopts="" tests/test_agreement.py tests/test_torch_backend.py -k "cuda or agree" -rs
step bench_torch 180 $PY benchmarks/bench_torch.py --trials "${BENCH_TRIALS:-1000}" --n 500 --T 50
step bench_torch_loop 120 $PY benchmarks/bench_torch_loop.py --device cuda --trials 1000 --json "$OUT/torch_loop.json"
[ "${SKIP_PAPER001:-0}" = 1 ] || step paper001 240 $PY benchmarks/paper001_large_n.py --budget-s 150 --json "$OUT/paper001_large_n.json"
