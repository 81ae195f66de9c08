#!/usr/bin/env bash
# Installs Apache Kafka 4.3.1 (broker, tools and Java clients) as a test peer: Maven resolves the jars listed in
# tools/kafka/pom.xml from Maven Central into one folder (~54 MB, ~11 s). fetchtool itself has no Java; the tests
# start KRaft nodes and Kafka's tool classes from these jars (tools/kafka_peer.py).
#
# Usage:  tools/install_kafka.sh [DIR]     (default DIR: /opt/kafka431/libs)
# Needs:  java 17+ and mvn on PATH (.ci/run installs them from Debian's packages)
# Result: DIR holds the jars; the script prints DIR on stdout. Tests find it through FETCHTOOL_KAFKA_LIBS.
# Idempotent: a folder that already holds the pinned broker, client and slf4j 2 jars is kept as it is.
set -euo pipefail

dir=${1:-/opt/kafka431/libs}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

complete() {
  [ -f "$dir/kafka_2.13-4.3.1.jar" ] && [ -f "$dir/kafka-clients-4.3.1.jar" ] && [ -f "$dir/kafka-tools-4.3.1.jar" ] \
    && ls "$dir"/slf4j-api-2.*.jar >/dev/null 2>&1 && ls "$dir"/log4j-slf4j2-impl-*.jar >/dev/null 2>&1
}
if complete; then
  echo "install_kafka.sh: $dir already holds Apache Kafka 4.3.1" >&2
  echo "$dir"; exit 0
fi
command -v java >/dev/null || { echo "install_kafka.sh: no java on PATH (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "install_kafka.sh: no mvn on PATH (apt-get install maven)" >&2; exit 1; }
# A stale slf4j-api 1.7 left in the folder would win over 2.0 and silence the broker's log: start clean.
rm -f "$dir"/*.jar
mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir" >&2
complete || { echo "install_kafka.sh: Maven finished but $dir lacks the pinned jars" >&2; exit 1; }
echo "install_kafka.sh: $(ls "$dir" | wc -l) jars in $dir" >&2
echo "$dir"
