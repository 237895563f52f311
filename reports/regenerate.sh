#!/bin/sh
# Regenerate the example exactness reports committed under reports/example-*/.
# Usage (from anywhere): sh reports/regenerate.sh
# The reference must pass (exit 0) and the catalogued bug must be caught (exit 1);
# the JSON is byte-for-byte reproducible apart from the elapsed_s timings.
set -u
cd "$(dirname "$0")/.." || exit 2
COMMON="--mode quick --seed 0 --scenario screen --scenario corpus-bigram --scenario disjoint-supports --no-progress"

python -m specdec_check verify $COMMON --report reports/example-reference
status=$?
if [ "$status" -ne 0 ]; then echo "regenerate.sh: the reference verifier did not pass (exit $status)" >&2; exit 1; fi

python -m specdec_check verify specdec_check.bugs:recovered_with_failed_uniform $COMMON \
    --report reports/example-recovered-with-failed-uniform
status=$?
if [ "$status" -ne 1 ]; then echo "regenerate.sh: the catalogued bug was not caught (exit $status)" >&2; exit 1; fi
echo "regenerate.sh: example reports up to date"
