#!/usr/bin/env bash
# GPU check of gspdml (issues 26 and 37): one short run on one CUDA GPU that fails soft,
# planned for at most 8 minutes on an H100/H200. Stages, each under `timeout` and a total budget:
#   env         nvidia-smi, torch / CUDA versions, gspdml's dependencies, the precision auto picks
#   tests       pytest -m gpu tests/gpu (CUDA vs CPU equality, bf16/fp16 training, embed, faiss
#               input, every phase of a run on CUDA: tests/gpu/test_gpu_phases.py)
#   train-step  benchmarks/train_step.py: gspdml's step beside a plain PyTorch loop, ResNet-50 and
#               BN-Inception, GAP and GSP, 227 px, the presets' batches, fp32 and bf16 (issue 37 1-2)
#   compile     the same for ResNet-50 GAP in bf16 with trainer.compile / torch.compile
#   million     benchmarks/million_knn.py: the whole 1M x 128 exact leave-one-out on the GPU, and
#               faiss's GPU brute force beside it where faiss has GPU support (issue 37 6)
#   rehearse    scripts/rehearse.py: a CUB row at full size (11,788 JPEGs), GPU_CHECK_REHEARSE_STEPS
#               steps, per-phase times and the dry-run estimate beside the measured one (issue 37 5)
#   data        benchmarks/data_pipeline.py: img/s per loader worker per image recipe (issue 37 4)
#   gsp-layer   benchmarks/gsp_layer.py on the GPU (closed-form vs unrolled GSP backward)
#   demo-gsp    gspdml train demo-gsp, 100 steps in bf16 on the GPU, test MAP@R
# A stage whose dependencies do not import, or that finds no CUDA, is skipped with the reason;
# the script still writes every log and the table and exits 0 unless a stage failed or timed out.
#
#   scripts/gpu_check.sh                      # from the repository root; python3 with torch
# Output: $OUT (else $TMPDIR/gspdml-gpu-check): logs/<stage>.log and summary.md (the table); the demo run
# directory goes to $TMPDIR/gspdml-gpu-runs (not to $OUT, which returns only a few files).
# Variables: PYTHON (python3), GPU_CHECK_DEVICE (cuda; cpu runs the stages here, to test the
# script), GPU_CHECK_QUICK=1 (a few steps per stage), GPU_CHECK_BUDGET (seconds, 450),
# GPU_CHECK_MILLION_QUERIES (all 1,000,000), GPU_CHECK_REHEARSE_STEPS (300).
set -u
cd "$(dirname "$0")/.." || exit 2

export PYTHON=${PYTHON:-python3}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
QUICK=${GPU_CHECK_QUICK:-0}
BUDGET=${GPU_CHECK_BUDGET:-470}
OUT_DIR=${OUT:-${TMPDIR:-/tmp}/gspdml-gpu-check}
LOGS=$OUT_DIR/logs
ROWS=$OUT_DIR/rows.md
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
export GSPDML_CACHE=${GSPDML_CACHE:-${TMPDIR:-/tmp}/gspdml-gpu-check-cache}  # datasets and pre-trained weights
export PYTHONUNBUFFERED=1
mkdir -p "$LOGS" "$GSPDML_CACHE" && : >"$ROWS"
FAILED=0
START=$SECONDS

# --- helpers ---------------------------------------------------------------------------------

record() {  # stage, what, result, seconds: one row of the table (and its line on stdout)
    printf '| %s | %s | %s | %s |\n' "$1" "$2" "${3//|//}" "$4" >>"$ROWS"
    printf '   -> %s (%s s)\n' "$3" "$4"
}

missing_modules() {  # modules...: prints the first import error, nothing when all import
    "$PYTHON" - "$@" 2>&1 <<'EOF' | tail -n 1
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as error:
        print(f"{name} does not import ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})")
        break
EOF
}

device_ready() {  # prints why the stages cannot run on $DEVICE, nothing when they can
    [ "$DEVICE" = cpu ] && return
    "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || echo "no CUDA"
}

run_stage() {  # stage, what, limit seconds, summary function, needs, command...
    # needs: comma-separated modules that must import, "device" first where the stage runs on $DEVICE
    local stage=$1 what=$2 limit=$3 summary=$4 needs=$5 log=$LOGS/$1.log
    shift 5
    local left=$((BUDGET - (SECONDS - START))) why="" status begin=$SECONDS
    echo "== $stage: $what"
    [ "${needs%%,*}" = device ] && why=$(device_ready) && needs=${needs#device}
    [ -z "$why" ] && why=$(missing_modules ${needs//,/ })
    [ -z "$why" ] && [ "$left" -lt 20 ] && why="out of the ${BUDGET} s budget"
    if [ -n "$why" ]; then
        echo "skipped: $why" >"$log"
        record "$stage" "$what" "skipped: $why" 0
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    printf '$ %s\n' "$*" >"$log"
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    status=$?
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        FAILED=$((FAILED + 1))
        record "$stage" "$what" "TIMEOUT after ${limit} s; $($summary "$log")" $((SECONDS - begin))
    elif [ "$status" -ne 0 ]; then
        FAILED=$((FAILED + 1))
        record "$stage" "$what" "FAILED (exit $status): $(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)" $((SECONDS - begin))
    else
        record "$stage" "$what" "$($summary "$log")" $((SECONDS - begin))
    fi
}

quick() {  # value when GPU_CHECK_QUICK=1, else the other
    if [ "$QUICK" = 1 ]; then echo "$1"; else echo "$2"; fi
}
MILLION_QUERIES=${GPU_CHECK_MILLION_QUERIES:-$(quick 2000 1000000)}
REHEARSE_STEPS=${GPU_CHECK_REHEARSE_STEPS:-$(quick 5 300)}

# --- stage 1: the machine ----------------------------------------------------------------------

environment() {
    command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "nvidia-smi: not found"
    echo "python: $("$PYTHON" --version 2>&1)"
    "$PYTHON" - <<'EOF'
import importlib
for name in ("torch", "numpy", "scipy", "sklearn", "yaml", "safetensors", "tqdm", "PIL", "pytest", "faiss", "timm", "torchvision"):
    try:
        print(f"{name}: {getattr(importlib.import_module(name), '__version__', 'present')}")
    except Exception as error:
        print(f"{name}: MISSING ({type(error).__name__}: {error})")
import torch
print(f"torch {torch.__version__}, CUDA build {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"CUDA available: {torch.cuda.is_available()}, {torch.get_num_threads()} CPU threads")
try:
    from gspdml.compat import hardware
except ImportError as error:
    print(f"gspdml.compat.hardware: not importable ({error})")
else:
    print(f"CPU: {hardware.cpu_model()}; auto precision on cpu: {hardware.auto_precision('cpu')}")
    if torch.cuda.is_available():
        print(f"GPU: auto precision on cuda: {hardware.auto_precision(torch.device('cuda'))}")
EOF
}

summary_environment() {
    local gpu torch
    gpu=$(grep -m1 '^GPU 0' "$1" | sed 's/ (UUID.*//')
    torch=$(grep -m1 '^torch [0-9]' "$1" | cut -d, -f1-2)
    echo "${gpu:-no GPU listed}; ${torch:-torch missing}; $(grep -c 'MISSING' "$1") of 12 modules missing"
}

# --- stage 2: the GPU tests --------------------------------------------------------------------

summary_tests() {
    grep -E '[0-9]+ (passed|failed|skipped|error)' "$1" | tail -n 1 | tr -d '='
}

# --- stage 3: the GSP layer benchmark ----------------------------------------------------------

summary_gsp_layer() {  # the layer table's row n = 49, m = 64, 100 iterations
    awk -F'|' '$2 + 0 == 49 && $3 + 0 == 64 && $4 + 0 == 100 { gsub(/ /, "", $6); gsub(/ /, "", $7); gsub(/ /, "", $9); gsub(/ /, "", $10)
        printf "n=49 m=64 100 iters fwd+bwd: closed form %s ms (%s MiB), unrolled %s ms (%s MiB)", $6, $9, $7, $10; exit }' "$1"
}

# --- stages 4-5: the training step beside a plain loop ------------------------------------------

summary_train_step() {  # "backbone pooling precision gspdml/plain img/s" of each table row
    awk -F'|' 'NF > 9 && $7 + 0 > 0 { gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $5); gsub(/ /, "", $7); gsub(/ /, "", $8)
        printf "%s%s %s %s %s/%s", sep, $2, $3, $5, $7, $8; sep = "; " } END { if (sep) print " img/s (gspdml/plain)" }' "$1"
}

# --- stage 6: 1M x 128 exact leave-one-out ----------------------------------------------------

summary_million() {
    echo "$(grep -m1 '^gspdml exact' "$1" | cut -d';' -f1); $(grep -m1 '^faiss' "$1")"
}

# --- stages 7-8: the rehearsal of a CUB row, the data pipeline --------------------------------------

summary_rehearse() {
    grep -E '^(measured|estimate)' "$1" | tr '\n' ' '
}

summary_data() {  # the mlrc rows: img/s per worker of gspdml and of the plain reference
    awk -F'|' '$2 ~ /mlrc/ { gsub(/ /, "", $2); gsub(/ /, "", $4); gsub(/ /, "", $5); printf "%s%s gspdml %s, plain %s img/s/worker", sep, $2, $4, $5; sep = "; " }' "$1"
}

# --- stage 6: demo-gsp in bf16 ---------------------------------------------------------------

summary_demo() {  # test metrics, or how far the run got; the pre-training's time
    "$PYTHON" - "$1" <<'EOF'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
start = text.rfind("\n{\n")  # the results JSON that `gspdml train` prints last
results = json.JSONDecoder().raw_decode(text[start + 1:])[0] if start >= 0 else {}
test = results.get("test")
rounds = re.findall(r"step (\d+/\d+): loss ([\d.]+), val map_at_r ([\d.]+)", text)
if test:
    parts = [f"test MAP@R {100 * test['map_at_r']:.2f}, P@1 {100 * test['precision_at_1']:.2f} after {results['steps']} steps"]
else:
    parts = [f"last round step {rounds[-1][0]}, val MAP@R {100 * float(rounds[-1][2]):.2f}" if rounds else "no validation round"]
pre = re.search(r"pre-trained \S+: held-out tile accuracy ([\d.]+)% in (\d+) s", text)
if pre:
    parts.append(f"pre-training {pre.group(2)} s ({pre.group(1)}% tile accuracy)")
else:
    parts.append("pre-training unfinished" if "pre-training " in text else "pre-trained weights cached")
print("; ".join(parts))
EOF
}

# --- the run -----------------------------------------------------------------------------------

echo "gspdml GPU check: device $DEVICE, output $OUT_DIR, budget $BUDGET s$( [ "$QUICK" = 1 ] && echo ', quick')"
CORE=torch,numpy,scipy,sklearn,yaml,safetensors,tqdm,PIL

export -f environment
run_stage env "machine, torch, dependencies" 30 summary_environment "" bash -c environment
run_stage tests "pytest -m gpu tests/gpu" 120 summary_tests "device,$CORE,pytest" \
    "$PYTHON" -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu
STEP_ARGS=$(quick "--size 64 --batch 8 --steps 1 --rounds 1" "--steps 10 --rounds 3")
run_stage train-step "gspdml step vs plain loop, fp32 and bf16 ($DEVICE)" 110 summary_train_step "device,$CORE,gspdml.training" \
    "$PYTHON" benchmarks/train_step.py --device "$DEVICE" --precisions fp32 bf16 $STEP_ARGS
run_stage million "1M x 128 exact leave-one-out + faiss GPU" 45 summary_million "device,$CORE,gspdml.evaluation" \
    "$PYTHON" benchmarks/million_knn.py --device "$DEVICE" --rows "$(quick 20000 1000000)" --queries "$MILLION_QUERIES"
run_stage rehearse "CUB row at full size, $REHEARSE_STEPS steps ($DEVICE)" 110 summary_rehearse "device,$CORE,gspdml.training" \
    "$PYTHON" scripts/rehearse.py gsp-table1 --rows cub-fair-c2-gsp-nozsp --steps "$REHEARSE_STEPS" --device "$DEVICE" \
    --root "${TMPDIR:-/tmp}/gspdml-rehearsal"
run_stage compile "ResNet-50 GAP bf16: trainer.compile vs torch.compile plain" 75 summary_train_step "device,$CORE,gspdml.training" \
    "$PYTHON" benchmarks/train_step.py --device "$DEVICE" --precisions bf16 --backbones resnet50 --poolings gap --compile $STEP_ARGS
run_stage data "data pipeline img/s per worker" 30 summary_data "$CORE,gspdml.data" \
    "$PYTHON" benchmarks/data_pipeline.py --images "$(quick 8 64)"
run_stage gsp-layer "GSP layer fwd+bwd, B=32 d=128 ($DEVICE)" 30 summary_gsp_layer "device,$CORE,gspdml.training" \
    "$PYTHON" benchmarks/gsp_layer.py --device "$DEVICE" --only layer --repeats 2
run_stage demo-gsp "gspdml train demo-gsp, bf16 ($DEVICE)" 60 summary_demo "device,$CORE,gspdml.cli,gspdml.training" \
    "$PYTHON" -m gspdml train demo-gsp trainer.precision=bf16 trainer.device="$DEVICE" \
    output_dir="${TMPDIR:-/tmp}/gspdml-gpu-runs" name="demo-gsp-$(date +%s)" schedule.max_steps="$(quick 20 100)" \
    evaluation.every="$(quick 10 50)" --no-progress

{
    echo "## gspdml GPU check ($DEVICE$( [ "$QUICK" = 1 ] && echo ', quick'))"
    echo
    echo "| stage | what | result | seconds |"
    echo "|---|---|---|---|"
    cat "$ROWS"
    echo
    echo "total $((SECONDS - START)) s; logs in $LOGS"
} >"$OUT_DIR/summary.md"
rm -f "$ROWS"
echo
cat "$OUT_DIR/summary.md"
[ "$FAILED" -eq 0 ]
