#!/usr/bin/env bash
# make test: the whole suite as two pytest runs at once, the Spark tests (-m spark) and
# the rest (-m "not spark"). Most of the suite waits (on servers, timeouts, Spark's JVM)
# rather than computes, so on 2 cores the two halves together take about as long as the
# longer one; only one local Spark runs at a time, as in a single run. The rest prints as
# it runs; the Spark half's output follows once both are done. Exit status: the first
# half that failed, or 0. A half that selects no test (pytest's status 5, as when the
# arguments name only files of the other half) counts as passed, unless both do.
#
# Usage: tools/run_tests.sh PYTHON [PYTEST_ARGS...]
set -uo pipefail
python=$1
shift
spark_log=$(mktemp "${TMPDIR:-/tmp}/nats-sync-spark-tests.XXXXXX")
trap 'rm -f "$spark_log"' EXIT

"$python" -m pytest -m spark "$@" >"$spark_log" 2>&1 &
spark_pid=$!
"$python" -m pytest -m "not spark" "$@"
rest=$?
wait "$spark_pid"
spark=$?

echo
echo "===== the Spark tests (-m spark), run alongside ====="
cat "$spark_log"
echo "===== make test: the rest exited $rest, the Spark tests $spark (5: none selected) ====="

if [ "$rest" -eq 5 ] && [ "$spark" -eq 5 ]; then
    exit 5
fi
for status in "$rest" "$spark"; do
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then
        exit "$status"
    fi
done
exit 0
