#!/usr/bin/env bash
# Make sure `java` on PATH is Java 17, the version PySpark 4.3 is run with here.
# PySpark finds java on PATH, so JAVA_HOME is not needed; if it is set, it must
# point at a Java 17 too, because PySpark then prefers it over PATH.
set -euo pipefail

die() {
    echo "ensure_java: $*" >&2
    exit 1
}

# Prints the major version of the given java binary, or nothing.
java_major() {
    local java_bin=$1
    command -v "$java_bin" >/dev/null 2>&1 || return 0
    "$java_bin" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

run_as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root to run '$*' and sudo is not installed; install openjdk-17-jre-headless by hand"
    fi
}

if [[ $(java_major java) != 17 ]]; then
    echo "ensure_java: java on PATH is not Java 17 (found: '$(java_major java)'); installing openjdk-17-jre-headless" >&2
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install a Java 17 runtime and put it on PATH"
    run_as_root apt-get update
    run_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless

    # Another default Java may still win on PATH: select 17 explicitly.
    if [[ $(java_major java) != 17 ]]; then
        jdk17_java=$(ls -d /usr/lib/jvm/java-17-openjdk-*/bin/java 2>/dev/null | head -n 1 || true)
        [[ -n $jdk17_java ]] || die "openjdk-17-jre-headless installed but no java binary found under /usr/lib/jvm"
        run_as_root update-alternatives --set java "$jdk17_java"
    fi
    [[ $(java_major java) == 17 ]] || die "java on PATH still is not Java 17 after installing it"
fi

if [[ -n ${JAVA_HOME:-} && $(java_major "$JAVA_HOME/bin/java") != 17 ]]; then
    die "JAVA_HOME=$JAVA_HOME is not a Java 17, and PySpark prefers it over PATH; unset JAVA_HOME or point it at Java 17"
fi

echo "ensure_java: $(java -version 2>&1 | head -n 1)"
