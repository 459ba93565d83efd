#!/usr/bin/env bash
# run_all.sh - the whole test suite (what `make test` and CI run): unit tests, command-line
# tests, parity with the PyTorch reference on random configs, the library as other trainers
# link it (install, pkg-config, the example trainers, the Python binding), the unit tests
# again under ASan+UBSan (one suite), and a short fuzzing run. Runs every suite, then prints one
# summary line.
# Suites run TEST_JOBS (2) at a time: each is a process tree of its own (its own temporary
# directory, reading the built tree only), most of them mpirun jobs of one thread per rank
# that leave a core idle while they start, load and write; a suite's output is printed whole
# when it ends, with its seconds. TEST_JOBS=1 runs them one after another.
set -u
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
JOBS=${TEST_JOBS:-2}
passed=0; failed=0; skipped=0; failed_names=""
L=$(mktemp -d /tmp/zt_run_all.XXXXXX)
trap 'rm -rf "$L"' EXIT
declare -A name_of=() t0_of=() log_of=()
n_started=0

reap() { # waits for one running suite, prints its output and tallies its status
    local pid st
    wait -n -p pid
    st=$?
    local name=${name_of[$pid]}
    echo "=== $name"
    cat "${log_of[$pid]}"
    echo "=== $name: $((SECONDS - t0_of[$pid])) s"
    if [ $st -eq 0 ]; then passed=$((passed + 1))
    elif [ $st -eq 77 ]; then skipped=$((skipped + 1)); echo "=== $name: skipped"
    else failed=$((failed + 1)); failed_names="$failed_names $name"; echo "=== $name: FAILED (status $st)"; fi
    unset "name_of[$pid]"
}
suite() {   # suite NAME command...: started when fewer than JOBS run
    local name=$1; shift
    while [ "${#name_of[@]}" -ge "$JOBS" ]; do reap; done
    n_started=$((n_started + 1))
    "$@" >"$L/$n_started.log" 2>&1 </dev/null &
    log_of[$!]=$L/$n_started.log
    name_of[$!]=$name
    t0_of[$!]=$SECONDS
}
drain() { while [ "${#name_of[@]}" -gt 0 ]; do reap; done; }

# the unit tests again under ASan+UBSan (built into build/asan: the other suites read build/
# only), one suite: its build runs beside the others
asan_all() {
    $MAKE -s asan-build || { echo "asan-build failed"; return 1; }
    local t st bad=0
    for t in build/asan/tests/test_*; do
        # (the Makefile's ASAN_ENV, and why intercept_tls_get_addr=0)
        env ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
            "$t" >"$L/asan.log" 2>&1
        st=$?
        if [ $st -ne 0 ] && [ $st -ne 77 ]; then
            cat "$L/asan.log"; echo "asan:$(basename "$t"): FAILED (status $st)"; bad=1
        else echo "asan:$(basename "$t"): $([ $st -eq 0 ] && echo passed || echo skipped)"; fi
    done
    return $bad
}

if ! $MAKE -s -j2 all unit-tests; then echo "build failed"; echo "0 passed, 1 failed"; exit 1; fi
suite asan asan_all
# (the longest first: two lanes finish together)
suite bf16 bash tests/test_bf16.sh build/zerotrain
suite zero bash tests/test_zero.sh build/zerotrain
suite fp16 bash tests/test_fp16.sh build/zerotrain
suite optim bash tests/test_optim.sh build/zerotrain
suite units bash tests/test_units.sh
suite estimate bash tests/test_estimate.sh build/zerotrain
suite train bash tests/test_train.sh build/zerotrain
suite generate bash tests/test_generate.sh build/zerotrain
suite robust bash tests/test_robust.sh build/zerotrain
suite recompute bash tests/test_recompute.sh build/zerotrain
suite cls-parity env ZT=build/zerotrain bash tests/test_bert_cls_random.sh
suite family-parity env ZT=build/zerotrain bash tests/test_family_random.sh
suite t5 bash tests/test_t5.sh build/zerotrain
suite t5-parity env ZT=build/zerotrain bash tests/test_t5_random.sh
suite cli bash tests/test_cli.sh build/zerotrain
suite ds-configs bash tests/test_ds_configs.sh build/zerotrain
suite finetune bash tests/test_finetune.sh build/zerotrain
suite family bash tests/test_family.sh build/zerotrain
suite albert bash tests/test_albert.sh build/zerotrain
suite electra bash tests/test_electra.sh build/zerotrain
suite text2text bash tests/test_text2text.sh build/zerotrain
suite parity env ZT=build/zerotrain bash tests/test_bert_random.sh
suite prepare bash tests/test_prepare.sh build/zerotrain
suite "fuzz(${FUZZ_SECONDS}s)" $MAKE -s fuzz FUZZ_SECONDS="$FUZZ_SECONDS"
for t in build/tests/test_*; do suite "$(basename "$t")" "$t"; done
# the bf16 products' oneDNN path where this CPU has it (77 elsewhere)
suite test_hgemm-onednn build/tests/test_hgemm --onednn
# the fp32 products' oneDNN path where this CPU has AVX-512 (77 elsewhere)
suite test_sgemm-onednn build/tests/test_sgemm --onednn
# the engine's modules call each other one way only (nm over build/obj/engine)
suite layers python3 tests/layers.py build
# offload without CAP_IPC_LOCK under a 64 KiB locked-memory limit: unregistered buffers
suite memlock setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
    bash -c 'ulimit -l 64 && exec env ZT_MEMLOCK_TEST=1 build/tests/test_offload'
drain
[ -n "$failed_names" ] && echo "failed suites:$failed_names"
echo "suites: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
