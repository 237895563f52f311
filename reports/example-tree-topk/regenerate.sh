#!/bin/sh
# Regenerate the tree example (reports/example-tree-topk/): is top-k tree drafting lossless?
# Usage (from anywhere): sh reports/example-tree-topk/regenerate.sh
# The one-hot rule on top-k drafts must pass (exit 0), the i.i.d. rule on the same drafts must fail
# (exit 1); figures.py prints the exact losses quoted in README.md.
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=reports/example-tree-topk
COMMON="--drafting topk --mode default --seed 0 --scenario star-3-enumerable --scenario small-tree-enumerable --scenario eagle-26 --no-progress"

python -m specdec_check tree specdec_check.samplers:numpy_verify_tree_topk $COMMON --report $OUT/one-hot-rule
status=$?
if [ "$status" -ne 0 ]; then echo "regenerate.sh: the one-hot rule did not pass (exit $status)" >&2; exit 1; fi

python -m specdec_check tree specdec_check.bugs:tree_iid_rule_on_topk_drafts $COMMON --report $OUT/iid-rule
status=$?
if [ "$status" -ne 1 ]; then echo "regenerate.sh: the i.i.d. rule on top-k drafts was not caught (exit $status)" >&2; exit 1; fi

python $OUT/figures.py > $OUT/figures.txt || exit 1
echo "regenerate.sh: tree example up to date"
