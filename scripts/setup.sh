#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install kafkalog into it.
# Usage: scripts/setup.sh [extra]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "kafkalog needs Python 3.10 or newer; $PY is $("$PY" -V 2>&1)" >&2
    exit 2
fi
# Spark (the kafkalog data source) runs on Java 17 or newer: install Debian's JRE when it is
# missing or older and we are root, else stop and say how.
java_major() {
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\(\.\([0-9]*\)\)\?.*/\1 \3/p' | head -n 1 |
        awk '{ print ($1 == 1) ? $2 : $1 }'
}
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null || [ -z "$(java_major)" ]; then
    have=$(command -v java >/dev/null 2>&1 && java -version 2>&1 | head -n 1 || echo "no java")
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "Spark needs Java 17 or newer ($have): installing openjdk-17-jre-headless" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
        if [ "$(java_major)" -lt 17 ] 2>/dev/null; then
            jre=$(ls -d /usr/lib/jvm/java-17-openjdk-*/bin 2>/dev/null | head -n 1)
            if [ -n "$jre" ]; then export PATH="$jre:$PATH"; fi
        fi
    else
        echo "Spark needs Java 17 or newer on PATH ($have). Install it, e.g. as root on" >&2
        echo "Debian/Ubuntu: apt-get install openjdk-17-jre-headless (or put a JDK 17+ first" >&2
        echo "on PATH), then run this again." >&2
        exit 2
    fi
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
spec="."
if [ $# -gt 0 ] && [ -n "$1" ]; then spec=".[$1]"; fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec"
