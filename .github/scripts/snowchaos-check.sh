#!/usr/bin/env bash
# Runs snowchaos check the way the reusable workflow
# (.github/workflows/snowchaos-check.yml) does, from its environment:
#
#   SNOWCHAOS_CHECK_COMMAND  the command to check, as a shell would split it (required)
#   SNOWCHAOS_CHECK_FLAGS    more flags for snowchaos check (optional)
#   SNOWCHAOS_CHECK_OUT      where the reports go (default out/snowchaos-check)
#   SNOWCHAOS_BIN            the snowchaos binary (default: snowchaos on PATH)
#
# It writes the JUnit results, the HTML report, the scenario files it ran and
# the table, and exits with snowchaos check's status (0 kept its promises,
# 1 broke one, 2 unknown or invalid). .ci/run runs it on an example.
set -euo pipefail
: "${SNOWCHAOS_CHECK_COMMAND:?set SNOWCHAOS_CHECK_COMMAND to the command to check}"
out=${SNOWCHAOS_CHECK_OUT:-out/snowchaos-check}
bin=${SNOWCHAOS_BIN:-snowchaos}
mkdir -p "$out"
# The inputs are the workflow author's own: split them as a shell would.
eval "cmd=($SNOWCHAOS_CHECK_COMMAND)"
eval "flags=(${SNOWCHAOS_CHECK_FLAGS:-})"
"$bin" version
set +e
"$bin" check "${flags[@]}" --junit "$out/junit.xml" --html "$out/report.html" --scenarios "$out/scenarios" -- "${cmd[@]}" | tee "$out/check.txt"
code=${PIPESTATUS[0]}
set -e
echo "snowchaos check exited $code; reports in $out"
exit "$code"
