#!/usr/bin/env bash
# Resolve Apache Kafka (broker, tools, clients) from Maven Central and build the reference
# consumer/producer of kafka-it/ for the tests in tests/apache_kafka (docs/kafka-tests.md). Idempotent:
# downloaded and built once per machine and Kafka version into
#   ${KAFKALOG_CACHE:-${XDG_CACHE_HOME:-~/.cache}/kafkalog}/kafka-VERSION/{lib/*.jar,kafka-it.jar}
# (and tiered-storage/, Kafka's LocalTieredStorage, when the release publishes it) and then a
# no-op that takes milliseconds. On success the last line of stdout is that directory.
#
# Maven and a JDK are installed from Debian's packages when missing and run as root (unless
# KAFKALOG_KAFKA_INSTALL=0, as the pytest fixtures set it: only scripts/test.sh installs). Without
# Java 17+ or Maven, or when Maven cannot resolve the jars, it says why on stderr, prints
# nothing on stdout and exits 0 (the Kafka tests then skip, saying why) -- unless CI=true, where
# it exits 1: CI must run those tests.
# Environment: KAFKALOG_KAFKA_VERSION (default: kafka-it/pom.xml's, the newest 4.x release),
# KAFKALOG_CACHE, MAVEN (the mvn command).
set -euo pipefail
cd "$(dirname "$0")/.."

ci=${CI:-}
unavailable() {
    echo "scripts/kafka.sh: Apache Kafka for the tests is not available: $*" >&2
    if [ "${ci,,}" = "true" ]; then
        echo "scripts/kafka.sh: CI=true, so this is an error (tests/apache_kafka must run in CI)" >&2
        exit 1
    fi
    echo "scripts/kafka.sh: the tests in tests/apache_kafka will skip" >&2
    exit 0
}

pom_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' kafka-it/pom.xml | head -n 1)
version=${KAFKALOG_KAFKA_VERSION:-$pom_version}
cache=${KAFKALOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafkalog}
home=$cache/kafka-$version

# What the cached copy was made from: the version, the Maven project and the Java sources.
hash_of() { (echo "$version"; cat "$@") | sha256sum | cut -c1-16; }
lib_stamp=$(hash_of kafka-it/pom.xml)
jar_stamp=$(hash_of kafka-it/pom.xml $(find kafka-it/src -type f | LC_ALL=C sort))
if [ "$(cat "$home/lib.stamp" 2>/dev/null)" = "$lib_stamp" ] &&
    [ "$(cat "$home/jar.stamp" 2>/dev/null)" = "$jar_stamp" ] &&
    [ "$(cat "$home/tiered-storage.stamp" 2>/dev/null)" = "$lib_stamp" ]; then
    echo "$home"
    exit 0
fi

java_major() {
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\(\.\([0-9]*\)\)\?.*/\1 \3/p' | head -n 1 |
        awk '{ print ($1 == 1) ? $2 : $1 }'
}
command -v java >/dev/null 2>&1 || unavailable "no java on PATH (Kafka $version needs Java 17+)"
major=$(java_major)
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
    unavailable "Kafka $version needs Java 17+, java on PATH is $(java -version 2>&1 | head -n 1)"
fi
mvn=${MAVEN:-mvn}
# Maven resolves the jars and builds kafka-it, which needs a JDK (javac), not only a JRE: as root
# on Debian/Ubuntu the missing ones are installed (as scripts/setup.sh installs Java for Spark).
missing=()
command -v "$mvn" >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
if [ ${#missing[@]} -gt 0 ] && [ "${KAFKALOG_KAFKA_INSTALL:-1}" = 1 ] && [ "$(id -u)" = 0 ] &&
    command -v apt-get >/dev/null 2>&1; then
    echo "scripts/kafka.sh: installing ${missing[*]} (Debian packages) to build kafka-it/" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "${missing[@]}" >/dev/null; }; then
        unavailable "could not install ${missing[*]} with apt-get"
    fi
fi
command -v "$mvn" >/dev/null 2>&1 || unavailable "no Maven ('$mvn') on PATH to resolve Kafka $version"
command -v javac >/dev/null 2>&1 || unavailable "no JDK (javac) on PATH to build kafka-it/ (a JRE is not enough)"

mkdir -p "$cache"
exec 9>"$cache/.kafka-$version.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

started=$(date +%s)
log=$(mktemp "${TMPDIR:-/tmp}/kafkalog-kafka-mvn.XXXXXX")
trap 'rm -f "$log"' EXIT
profiles=()
case "$version" in 3.*) profiles=(-Pkafka3) ;; esac # Kafka 3.x brings its own log binding
run_mvn() {
    if ! "$mvn" -q -B -f kafka-it/pom.xml -Dkafka.version="$version" ${profiles[@]+"${profiles[@]}"} \
        -Dkafkalog.build="$home/build" "$@" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        unavailable "Maven failed to $1 for Kafka $version (output above)"
    fi
}
mkdir -p "$home"
if [ "$(cat "$home/lib.stamp" 2>/dev/null)" != "$lib_stamp" ]; then
    echo "scripts/kafka.sh: resolving Apache Kafka $version from Maven Central into $home/lib" >&2
    rm -rf "$home/lib.new"
    run_mvn dependency:copy-dependencies -DoutputDirectory="$home/lib.new"
    rm -rf "$home/lib" && mv "$home/lib.new" "$home/lib"
    echo "$lib_stamp" >"$home/lib.stamp"
fi
# Kafka's own remote storage for tests (LocalTieredStorage, in kafka-storage's test jar) for the
# tiered storage tests (docs/tiered-storage.md), kept apart from lib/ so that no other broker has
# it on its classpath. Not every release publishes that jar (4.2.2 and 4.4.0 do not): its absence
# is no error, it is written down in tiered-storage.missing.
if [ "$(cat "$home/tiered-storage.stamp" 2>/dev/null)" != "$lib_stamp" ]; then
    rm -rf "$home/tiered-storage" "$home/tiered-storage.missing"
    if ! "$mvn" -q -B -f kafka-it/pom.xml -Dkafkalog.build="$home/build" dependency:copy \
        -Dartifact="org.apache.kafka:kafka-storage:$version:jar:test" \
        -DoutputDirectory="$home/tiered-storage" >"$log" 2>&1; then
        rm -rf "$home/tiered-storage"
        echo "scripts/kafka.sh: no kafka-storage test jar (LocalTieredStorage) for Kafka $version:" \
            "the tiered storage tests run another version" >&2
        echo "Maven Central has no org.apache.kafka:kafka-storage:$version:jar:test (Kafka's" \
            "LocalTieredStorage) or it could not be resolved" >"$home/tiered-storage.missing"
    fi
    echo "$lib_stamp" >"$home/tiered-storage.stamp"
fi
if [ "$(cat "$home/jar.stamp" 2>/dev/null)" != "$jar_stamp" ]; then
    echo "scripts/kafka.sh: building kafka-it (reference consumer/producer) against Kafka $version" >&2
    run_mvn package
    cp "$home/build/kafka-it.jar" "$home/kafka-it.jar.new" && mv "$home/kafka-it.jar.new" "$home/kafka-it.jar"
    echo "$jar_stamp" >"$home/jar.stamp"
fi
echo "scripts/kafka.sh: Apache Kafka $version ready in $home ($(($(date +%s) - started)) s)" >&2
echo "$home"
