"""The oracle's Java side, built by Maven: Apache Kafka 4.4.0 from Maven Central and our
Java agents (oracle/src/main/java), on one classpath.

``build()`` copies this folder's ``pom.xml`` and ``src/`` into a build folder in the
user's cache (``$XDG_CACHE_HOME/rebalance/oracle-<digest>``, default ``~/.cache``),
keyed by a digest of those files, and runs ``mvn -q -B package
dependency:copy-dependencies`` there once: Kafka's jars land in its ``lib/``, the agents
in ``target/rebalance-oracle.jar``. Maven's own repository (``~/.m2``) caches the
downloads. A build that fails leaves nothing behind that looks complete (the folder is
renamed into place only after Maven succeeded), so the next call builds again.

``python -m rebalance.oracle.maven`` builds and prints the classpath (``make setup``'s
oracle step). Errors raised: ``OracleError`` (no Java or Maven, or Maven failed; the
message names which, with Maven's last lines).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
KAFKA_VERSION = "4.4.0"
LOG4J2 = HERE / "log4j2.properties"


class OracleError(RuntimeError):
    """The oracle cannot run here: Java or Maven missing, a failed build, a broker that
    did not start. The message says which and what to do."""


def _sources() -> list[Path]:
    return [HERE / "pom.xml", *sorted(p for p in (HERE / "src").rglob("*") if p.is_file())]


def digest() -> str:
    """12 hex digits over the pom and the agents' sources (their paths and bytes)."""
    h = hashlib.sha256()
    for path in _sources():
        h.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def build_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rebalance" / f"oracle-{digest()}"


def tool(name: str) -> str:
    """The path of ``java`` or ``mvn`` (``$JAVA_HOME/bin/java`` first for java)."""
    if name == "java" and os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if not found:
        raise OracleError(f"`{name}` not found: the Kafka oracle needs Java 17 and Maven "
                          "(Debian: openjdk-17-jdk-headless maven)")
    return found


def build(quiet: bool = True) -> Path:
    """The build folder, built first if needed (``lib/`` and ``target/rebalance-oracle.jar``)."""
    target = build_dir()
    if (target / "lib").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        shutil.copy2(HERE / "pom.xml", work / "pom.xml")
        if (HERE / "src").is_dir():
            shutil.copytree(HERE / "src", work / "src")
        p = subprocess.run([tool("mvn"), "-B", *(["-q"] if quiet else []), "package",
                            "dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory=lib"],
                           cwd=work, capture_output=quiet, text=True)
        if p.returncode != 0:
            tail = "\n".join(((p.stdout or "") + (p.stderr or "")).splitlines()[-15:])
            raise OracleError(f"Maven could not build the oracle (exit {p.returncode}):\n{tail}")
        try:
            work.rename(target)
        except OSError:  # another process finished the same build first
            if not (target / "lib").is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def classpath() -> str:
    """Kafka's jars and the agents' jar, as a ``java -cp`` value."""
    built = build()
    jar = built / "target" / "rebalance-oracle.jar"
    return os.pathsep.join([str(built / "lib" / "*"), *([str(jar)] if jar.exists() else [])])


if __name__ == "__main__":
    try:
        print(classpath())
    except OracleError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
