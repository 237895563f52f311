#!/usr/bin/env bash
# GPU check for the torch backend: the torch tests (CUDA ones included) and the torch benchmark on CUDA.
# Finishes within 5 minutes on one modern GPU, plus up to 5 per upstream source (below); writes everything to $OUT/gpu_check_results.txt
# (or ./gpu_check_results.txt when OUT is unset). Usage: bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
RESULTS="${OUT:-.}/gpu_check_results.txt"
mkdir -p "$(dirname "$RESULTS")"
: > "$RESULTS"
log() { echo "$*" | tee -a "$RESULTS"; }

log "== gpu_check $(date -u +%FT%TZ) on $(hostname)"
python - <<'PY' 2>&1 | tee -a "$RESULTS"
import torch
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
PY
if ! pip show specdec-check >/dev/null 2>&1; then
  log "== installing the package (editable, no dependencies)"
  pip install -q --no-deps -e . 2>&1 | tail -2 | tee -a "$RESULTS"
fi

log "== pytest tests/torch (CUDA tests run when a GPU is present)"
SPECDEC_TORCH_THREADS=4 timeout 170 python -m pytest tests/torch -q -rs -p no:cacheprovider --durations=10 2>&1 \
  | tail -60 | tee -a "$RESULTS"
log "pytest exit status: ${PIPESTATUS[0]}"

log "== check_verifier(torch_verify) on cuda, quick mode, float32 and bfloat16 (outputs counted on the device)"
timeout 60 python - <<'PY' 2>&1 | tee -a "$RESULTS"
import time
from specdec_check import check_verifier
from specdec_check.samplers import torch_verify
for dtype in ("float32", "bfloat16"):
    start = time.perf_counter()
    report = check_verifier(torch_verify, backend="torch", device="cuda", dtype=dtype, mode="quick", seed=0)
    print(dtype, "passed" if report.passed else "FAILED", report.samples_used, "samples",
          f"{time.perf_counter() - start:.1f} s", [f.message[:100] for f in report.findings])
PY

log "== benchmark: torch_verify on cuda (float32, bfloat16) vs numpy_verify on the host"
timeout 90 python benchmarks/bench_torch.py --device cuda --dtype float32 --batch 100000 --repeats 3 2>&1 \
  | tee -a "$RESULTS"
timeout 30 python benchmarks/bench_torch.py --device cuda --dtype bfloat16 --batch 100000 --repeats 5 --skip-numpy \
  2>&1 | tee -a "$RESULTS"
log "== ragged verifiers (production calling convention) on cuda: torch_ragged_verify, quick mode, float32/bfloat16"
timeout 120 python - <<'PY' 2>&1 | tee -a "$RESULTS"
import time
from specdec_check.checker import check_ragged_verifier
from specdec_check.samplers import torch_ragged_verify
for dtype in ("float32", "bfloat16"):
    start = time.perf_counter()
    report = check_ragged_verifier(torch_ragged_verify, backend="torch", device="cuda", dtype=dtype, mode="quick")
    print(dtype, "passed" if report.passed else "FAILED", report.samples_used, "samples",
          f"{time.perf_counter() - start:.1f} s", [f.message[:100] for f in report.findings])
PY

log "== the real vLLM v1 RejectionSampler (Triton kernels) through from_vllm_v1, when vLLM is installed"
timeout 120 python - <<'PY' 2>&1 | tee -a "$RESULTS"
import time
try:
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler
except Exception as exc:
    print("vLLM not importable here, skipped:", type(exc).__name__, exc)
else:
    import vllm
    from specdec_check.adapters import from_vllm_v1
    from specdec_check.checker import check_ragged_verifier
    start = time.perf_counter()
    report = check_ragged_verifier(from_vllm_v1(RejectionSampler(Sampler())), backend="torch", device="cuda",
                                   mode="quick")
    print("vllm", vllm.__version__, "passed" if report.passed else "FAILED", f"{time.perf_counter() - start:.1f} s")
    for f in report.findings[:5]:
        print("  ", f.scenario, f.check, f.message[:300])
PY
log "== upstream: peers' real code through the adapters (pytest -m upstream tests/adapters; skips name what is missing)"
log "   installed packages are used (vllm, flashinfer); else SPECDEC_VLLM_SRCS (space-separated unzipped vLLM wheels"
log "   or checkouts, one run each) and SPECDEC_GPT_FAST_SRC (a gpt-fast checkout). FlashInfer needs this GPU."
for src in ${SPECDEC_VLLM_SRCS:-none}; do
  [ "$src" = none ] && unset SPECDEC_VLLM_SRC || export SPECDEC_VLLM_SRC="$src"
  log "-- SPECDEC_VLLM_SRC=${SPECDEC_VLLM_SRC:-(unset)}"
  SPECDEC_TORCH_THREADS=4 timeout 300 python -m pytest tests/adapters -m upstream -q -rs -p no:cacheprovider 2>&1 \
    | tail -15 | tee -a "$RESULTS"
done
log "== done $(date -u +%FT%TZ)"
