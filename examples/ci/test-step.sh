#!/bin/sh
# The harness's test step of a CI job, run in the project's root with its virtual
# environment active (github-actions.yml runs it): the project's variants on the runtimes
# this runner has, the smoke cases unless HARNESS_MARKS says otherwise; a failing case's
# artifacts under test-results/ (uploaded by the workflow), and the results as JSON for
# `py-harness merge` with other machines' (docs/scaling.md).
set -eu
machine="${HARNESS_MACHINE:-$(hostname)}"
exec pytest --runtime "${HARNESS_RUNTIMES:-all}" -m "${HARNESS_MARKS:-smoke}" \
  --output test-results --harness-json "test-results/results-$machine.json" "$@"
