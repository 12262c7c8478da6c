# SPDX-License-Identifier: Apache-2.0
"""DynamoDB Local (Amazon's Java server) on a free 127.0.0.1 port.

ensure_dynamodb_local() fetches DynamoDBLocal 3.3.1 and all its runtime
dependencies from Maven Central once (with mvn, into a throwaway local
repository), including sqlite4java's native library, into
cache_dir()/dynamodb-local-3.3.1/ — built in a temporary directory and renamed
into place when complete, so an interrupted download is never taken as a cache.

DynamoDBLocal runs it with a file database (-dbPath in its work directory,
-sharedDb: every access key and region sees the same tables), so restart()
keeps tables and items. DynamoDB Local has no option to choose the listening
address (its Jetty binds every interface), so it is started through a small
launcher (LAUNCHER_SOURCE, written to the work directory and run in java's
source-file mode, which needs no JDK) that sets the Jetty
connector's host to 127.0.0.1 before starting the server. Telemetry is off.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.servers import Server, ServerStartError, cache_dir, http_status  # noqa: E402
else:
    from .servers import Server, ServerStartError, cache_dir, http_status

DYNAMODB_LOCAL_VERSION = "3.3.1"
MAIN_JAR = f"DynamoDBLocal-{DYNAMODB_LOCAL_VERSION}.jar"
MAIN_CLASS = "software.amazon.dynamodb.services.local.main.ServerRunner"  # 3.x (was com.amazonaws...)
FETCH_TIMEOUT_S = 900.0

POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>s3lect.tests</groupId>
  <artifactId>dynamodb-local-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>software.amazon.dynamodb</groupId>
      <artifactId>DynamoDBLocal</artifactId>
      <version>{DYNAMODB_LOCAL_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""

# ServerRunner.main, minus telemetry, plus the listening host (the Jetty
# connector's host is null, i.e. every interface, unless set before start()).
LAUNCHER_SOURCE = """\
// SPDX-License-Identifier: Apache-2.0
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class S3lectDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("s3lect.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Server jetty = (Server) f.get(proxy);
        for (Connector c : jetty.getConnectors()) ((ServerConnector) c).setHost(host);
        proxy.start();
        System.out.println("s3lect: DynamoDB Local listening on " + host);
    }
}
"""


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise ServerStartError(
            f"{tool} not found: install Debian package {package} (scripts/deps does)"
        )
    return path


def _complete(d: Path) -> bool:
    return (d / MAIN_JAR).is_file() and (d / "libsqlite4java-linux-amd64.so").is_file()


def ensure_dynamodb_local() -> Path:
    """The directory holding DynamoDBLocal's jar, its dependencies and the
    sqlite4java native library (use it as -cp DIR/* and -Djava.library.path=DIR);
    fetched with mvn on first use. Raises ServerStartError saying why if it
    cannot be fetched."""
    dest = cache_dir() / f"dynamodb-local-{DYNAMODB_LOCAL_VERSION}"
    if _complete(dest):
        return dest
    if platform.machine() not in ("x86_64", "AMD64"):
        raise ServerStartError(
            f"DynamoDB Local: Maven Central has sqlite4java's native library for linux-amd64 "
            f"only, not {platform.machine()}"
        )
    _need("java", "default-jre-headless")
    mvn = _need("mvn", "maven")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        for old in dest.parent.glob(f".{dest.name}-*"):  # left by a killed fetch
            if time.time() - old.stat().st_mtime > 24 * 3600:
                shutil.rmtree(old, ignore_errors=True)
        return _fetch(mvn, dest)
    except OSError as e:
        raise ServerStartError(f"fetching DynamoDB Local into {dest}: {e}") from e


def _fetch(mvn: str, dest: Path) -> Path:
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        (stage / "pom.xml").write_text(POM)
        lib = stage / "lib"
        cmd = [
            mvn, "-q", "-B", "-f", str(stage / "pom.xml"),
            f"-Dmaven.repo.local={stage / 'm2'}",
            "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={lib}",
        ]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL, timeout=FETCH_TIMEOUT_S, cwd=stage)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            raise ServerStartError(
                f"fetching DynamoDB Local {DYNAMODB_LOCAL_VERSION} with mvn took over "
                f"{FETCH_TIMEOUT_S:.0f}s:\n{out[-4000:]}"
            ) from None
        if r.returncode != 0:
            raise ServerStartError(
                f"fetching DynamoDB Local {DYNAMODB_LOCAL_VERSION} from Maven Central failed "
                f"(mvn exit status {r.returncode}):\n$ {' '.join(cmd)}\n{r.stdout[-4000:]}"
            )
        # sqlite4java loads sqlite4java-linux-amd64-<version> or, failing that,
        # sqlite4java-linux-amd64 from java.library.path; Maven names the file
        # with the version, DynamoDB Local's own zip without: have both.
        natives = sorted(lib.glob("libsqlite4java-linux-amd64-*.so"))
        if not (lib / MAIN_JAR).is_file() or not natives:
            raise ServerStartError(
                f"mvn fetched DynamoDB Local without {MAIN_JAR} or libsqlite4java-linux-amd64-*.so; "
                f"got: {', '.join(sorted(p.name for p in lib.iterdir())) if lib.is_dir() else 'nothing'}"
            )
        shutil.copy2(natives[-1], lib / "libsqlite4java-linux-amd64.so")
        if dest.exists() and not _complete(dest):
            shutil.rmtree(dest)  # damaged by hand: replace it
        try:
            os.rename(lib, dest)
        except OSError:
            if not _complete(dest):  # not another process that finished first
                raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return dest


class DynamoDBLocal(Server):
    """DynamoDB Local on 127.0.0.1:port, file database in its work directory.

    endpoint, env() (AWS_* throwaway credentials, AWS_REGION=us-east-1,
    AWS_ENDPOINT_URL_DYNAMODB), start(), stop(), restart(hard=False) -> seconds,
    pause()/resume() (SIGSTOP/SIGCONT of the JVM), client() (boto3),
    create_table(name, pk="LockID", sk=None)."""

    name = "dynamodb-local"

    def __init__(self, libdir: Path | None = None):
        super().__init__(bucket="")
        # DynamoDB Local (2.0 and later) accepts access key IDs of letters and digits only.
        self.access_key = "s3lect" + self.access_key.removeprefix("s3lect-")
        self.libdir = libdir or ensure_dynamodb_local()
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir()
        self.launcher = self.workdir / "S3lectDynamoDBLocal.java"
        self.launcher.write_text(LAUNCHER_SOURCE)

    def command(self) -> list[str]:
        return [
            shutil.which("java") or "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Djava.library.path={self.libdir}",
            "-Ds3lect.host=127.0.0.1",
            "-cp", f"{self.libdir}/*",
            str(self.launcher),
            "-port", str(self.port),
            "-dbPath", str(self.data_dir),
            "-sharedDb",
            "-disableTelemetry",
        ]

    def start(self) -> "DynamoDBLocal":
        _need("java", "default-jre-headless")
        super().start()
        return self

    def ready(self) -> bool:
        # Any answer from DynamoDB's JSON endpoint (400: no X-Amz-Target) means up.
        return http_status(self.endpoint + "/", b"{}",
                           {"Content-Type": "application/x-amz-json-1.0"}) in (200, 400)

    def on_ready(self) -> None:
        pass  # no bucket; tables are the tests' business

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL_DYNAMODB": self.endpoint,
        }

    def client(self, secret_key: str | None = None) -> Any:  # type: ignore[override]
        """A boto3 DynamoDB client for this server (boto3 comes with moto[server],
        which is installed into this interpreter here if it is missing, as the
        moto server's start does: a binding's venv has it only after that)."""
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            from .servers import ensure_moto
            ensure_moto()
            try:
                import boto3
                from botocore.config import Config
            except ImportError as e:
                raise RuntimeError(
                    "boto3 is not installed: python3 -m pip install boto3 (scripts/deps "
                    "installs moto[server], which brings it)"
                ) from e
        return boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            config=Config(connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 1}),
        )

    def create_table(self, name: str, pk: str = "LockID", sk: str | None = None) -> None:
        """Creates table name (string hash key pk, string range key sk if
        given, on-demand billing) and waits (bounded) until it is ACTIVE."""
        attrs = [{"AttributeName": pk, "AttributeType": "S"}]
        keys = [{"AttributeName": pk, "KeyType": "HASH"}]
        if sk:
            attrs.append({"AttributeName": sk, "AttributeType": "S"})
            keys.append({"AttributeName": sk, "KeyType": "RANGE"})
        c = self.client()
        c.create_table(TableName=name, AttributeDefinitions=attrs, KeySchema=keys,
                       BillingMode="PAY_PER_REQUEST")
        deadline = time.monotonic() + 30
        while c.describe_table(TableName=name)["Table"]["TableStatus"] != "ACTIVE":
            if time.monotonic() > deadline:
                raise RuntimeError(f"table {name} not ACTIVE after 30s")
            time.sleep(0.1)
