#!/usr/bin/env bash
# test_units.sh - zerotrain as a library for other trainers: make install with pkg-config,
# the example C trainer (examples/charmlp) built against the *installed* library and run
# under mpirun at N = 1, 2, 3 (stage 3 with optimizer offload bit-identical to stage 0 at the
# same N; its loss falls; resume from its checkpoint bit-identical to not stopping), ranks
# that disagree on the order caught, the exports (zt_ only), the header from C99 -pedantic and
# C++, and the Python binding (numpy AdamW within 1e-6, PyTorch's AdamW loss curve within
# 1e-5; mpi4py's communicator; loaded into a running process beside torch and mpi4py in any
# order, nothing preloaded; its refusals); Adafactor over 3-D and 4-D tensors at N = 2 and 3,
# every stage, with checkpoints resumed across N; a unit acquired several times in one pass
# (gathered once, its gradient accumulated over the uses, reduced once). UNITS_LONG=1 adds
# NVMe offload, 8-bit AdamW and N = 3 runs.
# Usage: test_units.sh (from the repository root, after make)
set -u
MPI="mpirun --allow-run-as-root --oversubscribe"
PY=/usr/bin/python3
T=$(mktemp -d /tmp/zt_units.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ABI=$(sed -n 's/^#define ZT_ABI_VERSION \([0-9]*\).*/\1/p' include/zerotrain.h) # the soname's number
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# install into a prefix; build the example with pkg-config only
if make -s install PREFIX="$T/prefix" >"$T/install.log" 2>&1 \
   && [ -f "$T/prefix/include/zerotrain.h" ] && [ -f "$T/prefix/lib/libzerotrain.a" ] \
   && [ -L "$T/prefix/lib/libzerotrain.so" ] && [ -f "$T/prefix/lib/libzerotrain.so.$ABI" ] \
   && readelf -d "$T/prefix/lib/libzerotrain.so.$ABI" | grep -q "SONAME.*libzerotrain.so.$ABI"; then ok
else bad "make install"; tail -5 "$T/install.log"; fi
export PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig"
if [ "$(pkg-config --modversion zerotrain)" = "$(build/zerotrain version | cut -d' ' -f2)" ] \
   && cc -std=c11 -O2 -Wall -Wextra -Werror -o "$T/charmlp" examples/charmlp/charmlp.c \
          $(pkg-config --cflags --libs zerotrain openblas) -lm 2>"$T/cc.log" \
   && ldd "$T/charmlp" | grep -q "libzerotrain.so.$ABI => $T/prefix/lib/libzerotrain.so.$ABI"; then ok
else bad "the example against the installed library (pkg-config)"; head -5 "$T/cc.log"; fi
if cc -std=c11 -O2 -o "$T/charmlp-static" examples/charmlp/charmlp.c \
       $(pkg-config --cflags zerotrain openblas) "$T/prefix/lib/libzerotrain.a" \
       $(pkg-config --static --libs zerotrain openblas | sed 's/-lzerotrain //') -lm \
       2>"$T/ccs.log" && ! ldd "$T/charmlp-static" | grep -q libzerotrain \
   && $MPI -np 1 "$T/charmlp-static" --text README.md --steps 5 >"$T/static.log" 2>&1; then ok
else bad "the example linked statically (pkg-config --static)"; head -5 "$T/ccs.log"; fi

# N = 1, 2, 3: stage 3 with the optimizer state offloaded gives stage 0's bits; the loss falls
run() { # run NAME NP ARGS...
    local name=$1 np=$2; shift 2
    $MPI -np "$np" "$T/charmlp" --text README.md --print-every 1 "$@" >"$T/$name.log" 2>&1
}
loss_falls() { # first and last step's loss of a log
    awk '/^step /{l[n++]=$4} END{exit !(n > 1 && l[n-1] < l[0] - 0.5)}' "$1"
}
for np in 1 2 3; do
    run s0n$np "$np" --steps 120 --stage 0 --save "$T/s0n$np"
    run s3n$np "$np" --steps 120 --stage 3 --offload cpu --save "$T/s3n$np"
    if cmp -s "$T/s0n$np/model.safetensors" "$T/s3n$np/model.safetensors" \
       && cmp -s "$T/s0n$np/config.json" "$T/s3n$np/config.json" && loss_falls "$T/s0n$np.log"; then ok
    else bad "N=$np: stage 3 + offload vs stage 0, or the loss"; tail -2 "$T/s0n$np.log" "$T/s3n$np.log"; fi
done
# resume: 60 steps, a checkpoint, 60 more from it == 120 straight (stage 3, N = 2)
run half 2 --steps 60 --stage 3 --offload cpu --checkpoint-dir "$T/ck"
run rest 2 --steps 120 --stage 3 --offload cpu --checkpoint-dir "$T/ck" --resume --save "$T/res"
if grep -q "resumed from .*step-60" "$T/rest.log" \
   && cmp -s "$T/res/model.safetensors" "$T/s3n2/model.safetensors"; then ok
else bad "resume from the example's checkpoint"; tail -3 "$T/rest.log"; fi
# ranks that acquire different units, or declare different orders: errors, not hangs
for np in 2 3; do
    if timeout 120 $MPI -np $np build/tests/mpi_units >"$T/mpi_units.log" 2>&1 \
       && [ "$(grep -c '^ok: ' "$T/mpi_units.log")" -eq $((7 * np)) ]; then ok
    else bad "mismatched orders and shapes across $np ranks"; cat "$T/mpi_units.log"; fi
    # the 16-bit reduce-scatter (communication_data_type): sums, rounding, overflow, bytes
    if timeout 120 $MPI -np $np build/tests/mpi_units comm16 >"$T/comm16.log" 2>&1 \
       && [ "$(grep -c '^ok: ' "$T/comm16.log")" -eq $((2 * np)) ]; then ok
    else bad "the 16-bit reduce-scatter across $np ranks"; cat "$T/comm16.log"; fi
done

# Adafactor over tensors of 3 and 4 dimensions (and a matrix and a vector) through the unit
# API at N = 2 and 3, every stage: the same bytes at every stage and N, equal to the kernels
# on whole tensors; each run saves a checkpoint after step 2 (exp_avg_sq_row / _col in
# Hugging Face's shapes), which the other N resumes at every stage to the same bytes
afrun() { # NAME NP STAGE ARGS...
    local name=$1 np=$2 st=$3; shift 3
    timeout 120 $MPI -np "$np" build/tests/mpi_units adafactor "$st" 4 "$T/af$name.bin" "$@" \
        >"$T/af$name.log" 2>&1 && grep -q "^ok: rank 0: adafactor" "$T/af$name.log"
}
for np in 2 3; do
    for st in 0 1 2 3; do
        if afrun "n${np}s$st" "$np" "$st" save "$T/afck$np$st" 2 \
           && cmp -s "$T/afn2s0.bin" "$T/afn${np}s$st.bin"; then ok
        else bad "Adafactor (3-D, 4-D) N=$np stage $st: not the bytes of N=2 stage 0, or the kernels'"
             tail -2 "$T/afn${np}s$st.log"; fi
    done
done
if "$PY" - "$T/afck33/step-2/rank-00000.safetensors" <<'EOF_PY'
import json, struct, sys
f = open(sys.argv[1], "rb")
h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
want = {"exp_avg_sq_row.t0": [4, 24], "exp_avg_sq_col.t0": [4, 20],
        "exp_avg_sq_row.t1": [2, 3, 8], "exp_avg_sq_col.t1": [2, 3, 12],
        "exp_avg_sq_row.t2": [48], "exp_avg_sq_col.t2": [40]}
got = {k: h[k]["shape"] for k in want if k in h}
sys.exit(0 if got == want and not any(k.endswith(".t3") for k in h) else 1)
EOF_PY
then ok; else bad "Adafactor's factored state in the checkpoint: not Hugging Face's shapes"; fi
for np in 2 3; do
    other=$((5 - np))
    for st in 0 1 2 3; do
        if afrun "r${np}s$st" "$np" "$st" load "$T/afck$other$((3 - st))/step-2" \
           && cmp -s "$T/afn2s0.bin" "$T/afr${np}s$st.bin"; then ok
        else bad "Adafactor (3-D, 4-D): N=$other stage $((3 - st))'s checkpoint resumed at N=$np stage $st differs"
             tail -2 "$T/afr${np}s$st.log"; fi
    done
done

# a unit acquired several times in one pass (ALBERT's shared layer): K = 4 uses a pass, each
# backward use adding its own gradient, recomputed before each backward use (variant 2) or
# not (0), against one use a pass adding the same gradients (1): the same parameter bytes,
# the same traffic per step (measured; stage 3: the unit gathered once per pass), at every
# stage the bytes of stage 0 (UNITS_LONG: N = 2 and 3 every stage; else N = 2, stage 3)
RU_NPS="2"; RU_STS="3"; [ -n "${UNITS_LONG:-}" ] && RU_NPS="2 3" && RU_STS="0 1 2 3"
for np in $RU_NPS; do
    for st in $RU_STS; do
        good=1
        for v in 0 1 2; do
            timeout 120 $MPI -np "$np" build/tests/mpi_units reuse "$st" 4 "$v" "$T/ru$np$st$v.bin" \
                >"$T/ru$np$st$v.log" 2>&1 && [ "$(grep -c '^ok: ' "$T/ru$np$st$v.log")" -eq "$np" ] \
                || { good=0; tail -3 "$T/ru$np$st$v.log"; }
        done
        if [ $good = 1 ] && cmp -s "$T/ru${np}${st}0.bin" "$T/ru${np}${st}1.bin" \
           && cmp -s "$T/ru${np}${st}0.bin" "$T/ru${np}${st}2.bin" \
           && { [ ! -f "$T/ru${np}00.bin" ] || cmp -s -n $((3 * 6144 * 4)) "$T/ru${np}00.bin" "$T/ru${np}${st}0.bin"; }; then ok
        else bad "a unit used 4 times a pass, N=$np stage $st: not the bytes or traffic of one use"; fi
    done
done

# exports and the header
others=$(nm -D --defined-only build/libzerotrain.so | awk '$2 != "A" {print $3}' | grep -v '^zt_')
if [ -z "$others" ]; then ok; else bad "exports other than zt_: $(echo $others | head -c 300)"; fi
printf '#include <zerotrain.h>\nint main(void) { return zt_abi_version() != ZT_ABI_VERSION; }\n' >"$T/h.c"
cp "$T/h.c" "$T/h.cc"
if cc -std=c99 -pedantic -Wall -Wextra -Werror $(pkg-config --cflags zerotrain) -o "$T/h" "$T/h.c" \
       $(pkg-config --libs zerotrain) && "$T/h" \
   && cc -std=c99 -pedantic -Wall -Wextra -Werror -DZT_EXPERIMENTAL $(pkg-config --cflags zerotrain) \
       -fsyntax-only "$T/h.c" \
   && g++ -std=c++11 -pedantic -Wall -Wextra -Werror -DZT_EXPERIMENTAL $(pkg-config --cflags zerotrain) \
       -o "$T/hpp" "$T/h.cc" $(pkg-config --libs zerotrain) && "$T/hpp"; then ok
else bad "the header from C99 -pedantic and C++"; fi

# the Python binding against the installed library
export ZEROTRAIN_LIB="$T/prefix/lib/libzerotrain.so.$ABI"
pyrun() { # pyrun NAME NP SCRIPT ARGS...
    local name=$1 np=$2; shift 2
    if [ "$np" -eq 1 ]; then $PY "$@" >"$T/$name.log" 2>&1
    else $MPI -np "$np" -x ZEROTRAIN_LIB $PY "$@" >"$T/$name.log" 2>&1; fi
}
for spec in "1 0 none" "2 3 cpu" "3 2 none --mpi4py"; do
    set -- $spec
    np=$1 st=$2 off=$3; shift 3
    if pyrun py$np "$np" tests/python/test_numpy_adamw.py --stage "$st" --offload "$off" "$@" \
       && grep -q "^ok: " "$T/py$np.log"; then ok
    else bad "numpy AdamW via the binding (N=$np stage $st)"; tail -3 "$T/py$np.log"; fi
done
# mpi4py started MPI before the binding: nothing preloaded, at N = 1 and 2
if $MPI -np 2 -x ZEROTRAIN_LIB $PY tests/python/test_numpy_adamw.py --stage 1 --mpi4py-first \
       >"$T/pyfirst.log" 2>&1 && grep -q "^ok: " "$T/pyfirst.log" \
   && $PY tests/python/test_numpy_adamw.py --mpi4py-first >"$T/pyfirst1.log" 2>&1 \
   && grep -q "^ok: " "$T/pyfirst1.log"; then ok
else bad "mpi4py imported before the binding"; tail -3 "$T/pyfirst.log" "$T/pyfirst1.log"; fi
# the library in a running process: no allocator linked, no malloc of its own, no static TLS
# (dlopened late, it must not need the surplus that initial-exec TLS takes)
if ! readelf -d build/libzerotrain.so | grep -q "NEEDED.*jemalloc" \
   && ! readelf -d build/libzerotrain.so | grep -q "STATIC_TLS" \
   && ! readelf -r build/libzerotrain.so | grep -q "TPOFF" \
   && ! nm -D --defined-only build/libzerotrain.so \
        | grep -qwE "malloc|free|calloc|realloc|posix_memalign|aligned_alloc|memalign|mallctl"; then ok
else bad "libzerotrain links jemalloc, defines an allocator or needs static TLS"; fi
# ... imported after torch, after mpi4py, before both, after torch freed tensors: the code
# before the import runs once, the PID stays, the host's malloc is untouched, it trains
if $PY -c "import torch, mpi4py" 2>/dev/null; then
    for order in torch-first mpi4py-first zerotrain-first torch-freed; do
        if $PY tests/python/test_inprocess.py --order $order --mark "$T/mark.$order" --stage 3 \
               >"$T/inproc.$order.log" 2>&1 && grep -q "^ok: " "$T/inproc.$order.log" \
           && [ "$(wc -l <"$T/mark.$order")" -eq 1 ]; then ok
        else bad "the binding in a running process ($order)"; tail -3 "$T/inproc.$order.log"; fi
    done
    if $MPI -np 2 -x ZEROTRAIN_LIB $PY tests/python/test_inprocess.py --order mpi4py-first \
           --mark "$T/mark.mpi2" --stage 2 >"$T/inproc.mpi2.log" 2>&1 \
       && grep -q "^ok: " "$T/inproc.mpi2.log" && [ "$(wc -l <"$T/mark.mpi2")" -eq 2 ]; then ok
    else bad "the binding in a running process (mpi4py first, N=2)"; tail -3 "$T/inproc.mpi2.log"
    fi
else echo "skipped: the binding beside torch and mpi4py (python3-torch or -mpi4py missing)"; fi
# the binding's refusals (shapes, closed engines' views, steps, learning rates, -0), at N = 1
# and 3 (uneven shards); under a preloaded jemalloc the report's heap source is jemalloc
if pyrun bind1 1 tests/python/test_binding.py && grep -q "^ok: all" "$T/bind1.log" \
   && pyrun bind3 3 tests/python/test_binding.py && grep -q "^ok: all" "$T/bind3.log" \
   && LD_PRELOAD=libjemalloc.so.2 $PY tests/python/test_binding.py --only heap \
          --expect-heap jemalloc >"$T/bindje.log" 2>&1; then ok
else bad "the binding's refusals"; tail -3 "$T/bind1.log" "$T/bind3.log" "$T/bindje.log"; fi
# the binding's Model (prediction) against the reference, at N=1 and at N=2 stage 3
if pyrun model1 1 tests/python/test_model.py && grep -q "^ok: model" "$T/model1.log" \
   && pyrun model2 2 tests/python/test_model.py --stage 3 && grep -q "^ok: model" "$T/model2.log"; then ok
else bad "the binding's Model"; tail -3 "$T/model1.log" "$T/model2.log"; fi
# the binding's generate against the reference's greedy search, at N=1 and at N=3 stage 3
if pyrun gen1 1 tests/python/test_generate.py && grep -q "^ok: generate" "$T/gen1.log" \
   && pyrun gen3 3 tests/python/test_generate.py --stage 3 && grep -q "^ok: generate" "$T/gen3.log"; then ok
else bad "the binding's generate"; tail -3 "$T/gen1.log" "$T/gen3.log"; fi
if $PY -c "import torch" 2>/dev/null; then
    for spec in "1 0 none" "2 3 cpu"; do
        set -- $spec
        if pyrun torch$1 "$1" examples/python/torch_mlp.py --stage "$2" --offload "$3" \
           && grep -q "^ok: " "$T/torch$1.log"; then ok
        else bad "PyTorch with zerotrain's AdamW (N=$1)"; tail -3 "$T/torch$1.log"; fi
    done
else echo "skipped: PyTorch example (python3-torch not installed)"; fi

if [ -n "${UNITS_LONG:-}" ]; then
    mkdir -p "$T/nvme"
    for np in 2 3; do
        run l0n$np "$np" --steps 80 --stage 1 --optimizer adamw8bit --save "$T/l0n$np"
        run l3n$np "$np" --steps 80 --stage 3 --offload nvme --nvme-path "$T/nvme" \
            --optimizer adamw8bit --save "$T/l3n$np"
        if cmp -s "$T/l0n$np/model.safetensors" "$T/l3n$np/model.safetensors" \
           && loss_falls "$T/l0n$np.log"; then ok
        else bad "N=$np: 8-bit AdamW stage 3 + NVMe vs stage 1"; tail -2 "$T/l3n$np.log"; fi
    done
    if pyrun pynv 2 tests/python/test_numpy_adamw.py --stage 3 --offload nvme \
           --nvme-path "$T/nvme" && grep -q "^ok: " "$T/pynv.log"; then ok
    else bad "numpy AdamW via the binding, NVMe offload"; tail -3 "$T/pynv.log"; fi
    if $PY -c "import torch" 2>/dev/null; then
        if pyrun torch3 3 examples/python/torch_mlp.py --stage 2 && grep -q "^ok: " "$T/torch3.log"; then ok
        else bad "PyTorch with zerotrain's AdamW (N=3)"; tail -3 "$T/torch3.log"; fi
    fi
fi

echo "units: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
