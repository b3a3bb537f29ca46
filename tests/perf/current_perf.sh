#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The two perfs the perf tests compare with: checks that `perf` on PATH is
# Debian 12's 6.1, and prints the path of the current perf (7.2.x):
# $SFRAMEPP_CURRENT_PERF, else /opt/sframepp-ci/perf/bin/perf, where
# scripts/install-deps unpacks it with ../shared/tools/get-current-perf.
# Either missing or of another version: a FAIL line on stderr, exit status 1.
perf7=${SFRAMEPP_CURRENT_PERF:-/opt/sframepp-ci/perf/bin/perf}
[ -x "$perf7" ] || { echo "FAIL: the current perf $perf7 not found (scripts/install-deps fetches it; SFRAMEPP_CURRENT_PERF names another)" >&2; exit 1; }
command -v perf >/dev/null || { echo "FAIL: perf not installed (scripts/install-deps installs linux-perf)" >&2; exit 1; }
case $(perf version) in "perf version 6.1."*) ;; *) echo "FAIL: perf on PATH is $(perf version), not Debian 12's 6.1" >&2; exit 1;; esac
case $("$perf7" version) in "perf version 7.2."*) ;; *) echo "FAIL: $perf7 is $("$perf7" version), not 7.2" >&2; exit 1;; esac
echo "$perf7"
