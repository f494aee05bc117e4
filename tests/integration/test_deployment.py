"""Deployment artefacts, validated without Docker or a cluster: the Dockerfile's stages replayed on
this machine (its builder command builds the wheel, its runtime command installs only that wheel
in a fresh virtualenv, then its CMD and HEALTHCHECK run with its ENV against that install), the
Kubernetes manifests (kinds, ports, probes, security, references), the Grafana dashboard and the
Prometheus rules (every query names a family a real scrape exports; promtool accepts them)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import venv
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import yaml

from slowave.domain.api_keys import parse_key_config
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.conftest import BACKEND
from tests.metrics_scrape import exported_names, promtool_run, scrape
from tests.support import REPO, new_database_url, new_scope, pb, wait_until

pytestmark = pytest.mark.backend_neutral

SERVICE = "slowave.v1.MemoryService"
K8S = REPO / "deploy" / "kubernetes"
DASHBOARD = REPO / "deploy" / "grafana" / "slowave-dashboard.json"
RULES = REPO / "deploy" / "prometheus" / "slowave-rules.yaml"


# =========================================================================== the Dockerfile


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def one(self, keyword: str) -> str:
        found = self.all(keyword)
        assert len(found) == 1, (keyword, found)
        return found[0]

    def env(self) -> dict[str, str]:
        out = {}
        for args in self.all("ENV"):
            for token in shlex.split(args):
                key, sep, value = token.partition("=")
                assert sep, f"ENV in the legacy `ENV key value` form: {args}"
                out[key] = value
        return out


def parse_dockerfile(text: str) -> list[Stage]:
    """Logical instructions (continuations joined, comment lines dropped, as Docker does), by stage."""
    lines, pending = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continuation"
    stages: list[Stage] = []
    for line in lines:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            parts = args.split()
            stages.append(Stage(parts[0], parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None))
        else:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append((keyword, args))
    return stages


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list) and value and all(isinstance(v, str) for v in value), args
    return value


def healthcheck(args: str) -> tuple[dict[str, str], list[str]]:
    options, _, command = args.partition("CMD ")
    flags = dict(o.lstrip("-").split("=", 1) for o in options.split())
    return flags, exec_form(command)


def run_flags(args: str) -> tuple[list[str], str]:
    """A RUN's leading `--mount=…` style flags, and its shell command."""
    flags = []
    while args.startswith("--"):
        flag, _, args = args.partition(" ")
        flags.append(flag)
        args = args.lstrip()
    return flags, args


STAGES = parse_dockerfile((REPO / "Dockerfile").read_text())
BUILDER, RUNTIME = STAGES[0], STAGES[-1]
IGNORED = [
    line.strip()
    for line in (REPO / ".dockerignore").read_text().splitlines()
    if line.strip() and not line.strip().startswith("#")
]


def dockerignored(relative: str) -> bool:
    """Docker's matching, close enough for these patterns: a path is out when it, or a parent,
    matches a pattern (`**/` matches any depth)."""
    parts = relative.split("/")
    for i in range(1, len(parts) + 1):
        candidate = "/".join(parts[:i])
        for pattern in IGNORED:
            if fnmatch.fnmatchcase(candidate, pattern) or (
                pattern.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], pattern[3:])
            ):
                return True
    return False


def test_dockerfile_stages_shape():
    assert len(STAGES) == 2 and BUILDER.name == "builder"
    assert RUNTIME.image == "python:3.11-slim"
    assert any(re.search(r"\bpip wheel\b.*--wheel-dir /wheels \.$", run_flags(a)[1]) for a in BUILDER.all("RUN"))
    # The runtime takes nothing from the build context: no source tree, only the builder's wheels.
    assert not RUNTIME.all("COPY") and not RUNTIME.all("ADD")
    (install,) = [a for a in RUNTIME.all("RUN") if "pip install" in a]
    flags, command = run_flags(install)
    assert "--mount=type=bind,from=builder,source=/wheels,target=/wheels" in flags
    assert "--no-index" in command and "--find-links=/wheels" in command and command.endswith(" slowave")
    user = RUNTIME.one("USER")
    assert user.split(":")[0].isdigit() and int(user.split(":")[0]) >= 1000, "a numeric non-root user"
    assert set(RUNTIME.one("EXPOSE").split()) == {"50051", "9464"}
    assert exec_form(RUNTIME.one("VOLUME")) == ["/data"]
    env = RUNTIME.env()
    assert env["SLOWAVE_LISTEN_ADDR"] == "0.0.0.0:50051" and env["SLOWAVE_METRICS_ADDR"] == "0.0.0.0:9464"
    assert env["SLOWAVE_DATA_DIR"] == "/data" and env["SLOWAVE_LOG_FORMAT"] == "json"
    # The documented default: no opt-out of authentication baked into the image.
    assert "SLOWAVE_ALLOW_INSECURE_BIND" not in env
    assert exec_form(RUNTIME.one("CMD")) == ["slowave-server"]  # exec form: SIGTERM reaches the server
    flags_, command_ = healthcheck(RUNTIME.one("HEALTHCHECK"))
    assert command_[:2] == ["slowave", "health"] and SERVICE in command_
    assert {"interval", "timeout", "start-period", "retries"} <= set(flags_)


def test_dockerignore_keeps_the_context_small_and_the_sources_in():
    for path in (
        ".git",
        ".venv",
        "node_modules",
        "data",
        "tests",
        "server/slowave/v1/memory_service_pb2.py",
        "server/slowave/api/__pycache__/app.cpython-311.pyc",
    ):
        assert dockerignored(path), path
    for args in BUILDER.all("COPY"):
        for source in args.split()[:-1]:
            assert (REPO / source).exists(), source
            assert not dockerignored(source.rstrip("/")), f"COPY {source} is excluded by .dockerignore"
    assert not dockerignored("server/slowave/api/app.py") and not dockerignored(
        "protos/slowave/v1/memory_service.proto"
    )


def _copy_context(destination: Path) -> None:
    """The builder's COPY instructions (relative to its WORKDIR), from the repository through .dockerignore."""
    for args in BUILDER.all("COPY"):
        *sources, target = args.split()
        target_dir = destination / target
        for source in sources:
            src = REPO / source
            files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
            for path in files:
                if dockerignored(path.relative_to(REPO).as_posix()):
                    continue
                out = target_dir / (path.name if src.is_file() else path.relative_to(src))
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)


def _sh(command: str, cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])


@dataclass
class Image:
    root: Path
    bin: Path


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Image:
    """The Dockerfile replayed outside Docker: the builder's RUN in a copy of its build context, the
    runtime's pip install (the builder's wheels, --no-index) into a fresh virtualenv."""
    root = tmp_path_factory.mktemp("image")
    context, wheels = root / "src", root / "wheels"
    _copy_context(context)
    assert not list(context.rglob("*_pb2.py")), "generated stubs must come from the build, not the context"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("SLOWAVE_", "PIP_NO_CACHE"))}
    # The builder's ENV, except PIP_NO_CACHE_DIR: the image disables pip's cache to keep its layers
    # small; here the cache only saves downloads.
    build_env = {
        **base_env,
        **{k: v for k, v in BUILDER.env().items() if k != "PIP_NO_CACHE_DIR"},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for args in BUILDER.all("RUN"):
        _sh(run_flags(args)[1].replace("/wheels", str(wheels)), context, build_env)
    assert len(list(wheels.glob("slowave-*.whl"))) == 1

    venv.EnvBuilder(with_pip=True, clear=True).create(root / "venv")
    runtime_env = {**base_env, "PATH": f"{root / 'venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    runtime_env.pop("VIRTUAL_ENV", None)
    for args in RUNTIME.all("RUN"):
        flags, command = run_flags(args)
        if "pip install" in command:  # (the other RUN creates the system user: not replayed here)
            _sh(command.replace("/wheels", str(wheels)), root, runtime_env)
    return Image(root, root / "venv" / "bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


@dataclass
class Container:
    """The runtime stage's ENV with its ports and /data mapped to free ports and a temporary folder."""

    image: Image
    data: Path
    extra: dict[str, str] = field(default_factory=dict)
    grpc_port: int = field(default_factory=_free_port)
    metrics_port: int = field(default_factory=_free_port)

    def env(self) -> dict[str, str]:
        def remap(value: str) -> str:
            value = value.replace(":50051", f":{self.grpc_port}").replace(":9464", f":{self.metrics_port}")
            return str(self.data) + value[len("/data") :] if value == "/data" or value.startswith("/data/") else value

        env = {
            "PATH": f"{self.image.bin}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.data),
            "LANG": "C.UTF-8",
        }
        env.update({k: remap(v) for k, v in RUNTIME.env().items()})
        if BACKEND == "postgresql":
            env["SLOWAVE_DATABASE_URL"] = new_database_url(self.data)
        env.update(self.extra)
        return env

    def start(self) -> tuple[subprocess.Popen, list[str]]:
        proc = subprocess.Popen(
            exec_form(RUNTIME.one("CMD")),
            env=self.env(),
            cwd=self.data,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()
        return proc, lines

    def healthcheck(self) -> int:
        flags, command = healthcheck(RUNTIME.one("HEALTHCHECK"))
        timeout = float(flags["timeout"].rstrip("s"))
        try:
            return subprocess.run(
                command, env=self.env(), cwd=self.data, capture_output=True, timeout=timeout * 4
            ).returncode  # (a loaded test machine)
        except subprocess.TimeoutExpired:
            return -1


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=30)


@pytest.mark.timeout(1200)  # the first one builds the wheels and the virtualenv
def test_image_runs_its_cmd_and_its_healthcheck_tracks_serving(image, tmp_path):
    key = "swk_" + secrets.token_urlsafe(32)
    box = Container(image, tmp_path / "data", {"SLOWAVE_API_KEYS": f"team-a {key}"})
    box.data.mkdir()
    # The install is the wheel's, not the repository's.
    where = subprocess.run(
        [str(image.bin / "python"), "-c", "import slowave.v1.memory_service_pb2 as m; print(m.__file__)"],
        env=box.env(),
        cwd=box.data,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0 and str(image.root) in where.stdout, (where.stdout, where.stderr)
    assert box.healthcheck() != 0, "nothing listens yet: the health check must fail"

    proc, lines = box.start()
    try:
        wait_until(lambda: box.healthcheck() == 0 or proc.poll() is not None, timeout=120, what="healthy")
        assert proc.poll() is None, lines
        channel = grpc.insecure_channel(f"127.0.0.1:{box.grpc_port}")
        stub = pb_grpc.MemoryServiceStub(channel)
        request = pb.ActivateRequest(task="Check the image", scope=new_scope(), initial_goal="check")
        with pytest.raises(grpc.RpcError) as info:
            stub.Activate(request, timeout=30)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stub.Activate(request, metadata=[("authorization", f"Bearer {key}")], timeout=30).session_id
        assert "slowave_db_transaction_seconds" in scrape(box.metrics_port)
        channel.close()
    finally:
        code = _stop(proc)
    assert code == 0, lines
    assert lines and all(json.loads(line) for line in lines), "SLOWAVE_LOG_FORMAT=json: every line is JSON"
    access = [
        (d["code"], d["tenant"])
        for d in map(json.loads, lines)
        if d.get("msg") == "rpc" and d.get("method") == f"{SERVICE}/Activate"
    ]
    assert access == [("UNAUTHENTICATED", None), ("OK", "team-a")], access
    assert box.healthcheck() != 0, "stopped: the health check must fail"


@pytest.mark.timeout(1200)  # the first one builds the wheels and the virtualenv
def test_image_refuses_an_open_bind_without_keys_unless_opted_out(image, tmp_path):
    box = Container(image, tmp_path / "data")
    box.data.mkdir()
    proc, lines = box.start()
    assert proc.wait(timeout=120) == 2
    wait_until(
        lambda: any("SLOWAVE_ALLOW_INSECURE_BIND" in line for line in list(lines)),
        timeout=30,
        what="the refusal's explanation",
    )
    opted = Container(image, tmp_path / "data", {"SLOWAVE_ALLOW_INSECURE_BIND": "1"})
    proc, lines = opted.start()
    try:
        wait_until(lambda: opted.healthcheck() == 0 or proc.poll() is not None, timeout=120, what="healthy")
        assert proc.poll() is None, lines
    finally:
        assert _stop(proc) == 0, lines


# =========================================================================== Kubernetes


def _manifests() -> dict[str, list[dict]]:
    return {
        path.name: [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        for path in sorted(K8S.glob("*.yaml"))
    }


def _by_kind() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for docs in _manifests().values():
        for doc in docs:
            assert doc["kind"] not in out, f"two {doc['kind']} documents"
            out[doc["kind"]] = doc
    return out


def test_manifests_parse_and_kustomization_lists_them_all():
    docs = _manifests()
    kinds = _by_kind()
    assert set(kinds) == {"Kustomization", "Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "Secret"}
    assert sorted(kinds["Kustomization"]["resources"]) == sorted(n for n in docs if n != "kustomization.yaml")
    assert {i["name"] for i in kinds["Kustomization"]["images"]} == {
        c["image"] for c in kinds["Deployment"]["spec"]["template"]["spec"]["containers"]
    }


def test_deployment_probes_ports_security_and_resources():
    kinds = _by_kind()
    deployment = kinds["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": 50051, "metrics": 9464}
    assert container["readinessProbe"]["grpc"] == {"port": 50051, "service": SERVICE}
    assert container["livenessProbe"]["grpc"]["port"] == 50051
    assert container["livenessProbe"]["grpc"].get("service", "") == ""
    assert container["startupProbe"]["grpc"]["port"] == 50051
    assert all(k not in container[p] for p in ("readinessProbe", "livenessProbe") for k in ("httpGet", "exec"))
    assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and "memory" in container["resources"]["limits"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["runAsNonRoot"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] >= 1000
    assert pod["securityContext"]["runAsUser"] == int(RUNTIME.one("USER").split(":")[0]), "the image's user"
    # A read-only root: everything written goes to a volume.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert {"/data", "/tmp"} <= set(mounts) and set(mounts.values()) <= set(volumes)
    # The drain (20 s by default) fits in the grace period, preStop included.
    assert pod["terminationGracePeriodSeconds"] >= 20 + 5 + 5
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )


def test_configuration_and_secrets_are_wired_and_replicas_use_postgresql():
    kinds = _by_kind()
    config, secret_doc = kinds["ConfigMap"], kinds["Secret"]
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert [e["configMapRef"]["name"] for e in container["envFrom"]] == [config["metadata"]["name"]]
    sources = "\n".join(p.read_text() for p in (REPO / "server").rglob("*.py"))
    for key in config["data"]:
        assert re.fullmatch(r"SLOWAVE_[A-Z_]+", key) and f'"{key}"' in sources, f"{key} is not read by the server"
    env = {e["name"]: e for e in container["env"]}
    secret_keys = set(secret_doc["stringData"])
    for item in env.values():
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["name"] == secret_doc["metadata"]["name"] and ref["key"] in secret_keys
    (keys_volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert keys_volume["secret"]["secretName"] == secret_doc["metadata"]["name"]
    assert {i["key"] for i in keys_volume["secret"]["items"]} <= secret_keys
    keys_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == keys_volume["name"])
    assert env["SLOWAVE_API_KEYS_FILE"]["value"] == f"{keys_mount}/{keys_volume['secret']['items'][0]['path']}"
    assert parse_key_config(secret_doc["stringData"]["api-keys"], "secret.yaml"), "the placeholder parses"
    # Replicas share one database: more than one replica means SLOWAVE_DATABASE_URL is PostgreSQL.
    if kinds["Deployment"]["spec"]["replicas"] > 1:
        url_ref = env["SLOWAVE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"]
        assert secret_doc["stringData"][url_ref].startswith("postgresql+psycopg://")
        assert kinds["PodDisruptionBudget"]["spec"]["minAvailable"] < kinds["Deployment"]["spec"]["replicas"]


def test_service_names_grpc_and_metrics_ports_and_pdb_selects_the_pods():
    kinds = _by_kind()
    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    service = kinds["Service"]["spec"]
    assert service["selector"].items() <= labels.items()
    ports = {p["name"]: p for p in service["ports"]}
    assert set(ports) == {"grpc", "metrics"}
    assert (
        ports["grpc"]["appProtocol"] == "grpc"
        and ports["grpc"]["port"] == 50051
        and ports["grpc"]["targetPort"] == "grpc"
    )
    assert ports["metrics"]["targetPort"] == "metrics"
    assert kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    annotations = kinds["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ports["metrics"]["port"])


# =========================================================================== dashboard and rules

_PROMQL_WORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}


def promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (not functions, keywords, labels or durations)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        word, rest = match.group(), expr[match.end() :].lstrip()
        if word.lower() in _PROMQL_WORDS or rest.startswith("(") or expr[max(0, match.start() - 1)] == "$":
            continue
        names.add(word)
    return names


def _dashboard_exprs() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]


def _recorded() -> set[str]:
    return {r["record"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r}


def test_promql_name_extraction():
    assert promql_metric_names('histogram_quantile(0.99, sum by (le, op) (rate(a_bucket{x="b",c=~"d|e"}[5m])))') == {
        "a_bucket"
    }
    assert promql_metric_names("sum(rate(x_total[$__rate_interval])) / ignoring (k) max(y) > bool 2") == {
        "x_total",
        "y",
    }


def test_dashboard_panels_query_families_the_server_exports(server):
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and board["title"] and any(v["type"] == "datasource" for v in board["templating"]["list"])
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    assert all(p["datasource"]["uid"] == "${datasource}" and p["targets"] for p in panels)
    exported = exported_names(scrape(server.running.metrics_port))
    used = set()
    for title, expr in _dashboard_exprs():
        names = promql_metric_names(expr)
        assert names, (title, expr)
        assert names <= exported, (title, names - exported)
        used |= names
    # A panel for each of the operational questions.
    for family in (
        "grpc_server_handled_total",
        "grpc_server_handling_seconds_bucket",
        "slowave_exposed_targets_total",
        "slowave_feedback_assessments_total",
        "slowave_memory_stale_assessments_total",
        "slowave_procedure_effects_total",
        "slowave_commits_total",
        "slowave_reaped_sessions_total",
        "slowave_reaped_unassessed_exposures_total",
        "slowave_db_transaction_seconds_bucket",
        "slowave_open_sessions",
        "slowave_knowledge_gaps_reported_total",
    ):
        assert family in used, f"no panel queries {family}"


def test_dashboard_queries_are_valid_promql(tmp_path):
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {
                        "record": f"dashboard:panel_{i}",
                        "expr": expr.replace("$__rate_interval", "5m").replace("$__range", "1h"),
                    }
                    for i, (_title, expr) in enumerate(_dashboard_exprs())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    check = promtool_run("check", "rules", str(path))
    assert check.returncode == 0, check.stdout + check.stderr
    broken = tmp_path / "broken.yaml"  # control: promtool does reject invalid PromQL
    broken.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum(rate(x[5m])"}]}]})
    )
    assert promtool_run("check", "rules", str(broken)).returncode != 0


def test_prometheus_rules_check_test_and_name_exported_families(server):
    check = promtool_run("check", "rules", str(RULES))
    assert check.returncode == 0, check.stdout + check.stderr
    unit = promtool_run("test", "rules", RULES.with_name("slowave-rules.test.yaml").name, cwd=RULES.parent)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    exported = exported_names(scrape(server.running.metrics_port)) | _recorded()
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            names = promql_metric_names(rule["expr"])
            assert names and names <= exported, (rule.get("record") or rule.get("alert"), names - exported)
