"""Configuration from the environment (every variable is described in docs/operations.md)."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from slowave.domain.api_keys import KeyConfigError, KeyEntry, merge_key_configs, parse_key_config
from slowave.storage.database import PoolOptions

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 3600


def _default_database_url() -> str:
    data = Path(os.environ.get("SLOWAVE_DATA_DIR", "data"))
    return f"sqlite:///{data / 'slowave.db'}"


def parse_idle_timeout(raw: str | None) -> int:
    """Seconds; an unparsable value means the default (with a warning); <= 0 disables the reaper."""
    if raw is None:
        return DEFAULT_IDLE_TIMEOUT
    if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
        log.warning("SLOWAVE_SESSION_IDLE_TIMEOUT=%r is not an integer; using %d", raw, DEFAULT_IDLE_TIMEOUT)
        return DEFAULT_IDLE_TIMEOUT
    return int(raw.strip())


SEMANTIC_CHOICES = ("static", "minilm", "off")
DEFAULT_SEMANTIC = "static"


def parse_semantic(raw: str | bool | None) -> str:
    """SLOWAVE_SEMANTIC as one of SEMANTIC_CHOICES: `static` (the default; also on/1/true/yes),
    `minilm` (all-MiniLM-L6-v2 itself, needs the [semantic] extra) or `off` (also 0/false/no).
    Anything else means the default, with a warning."""
    if raw is None or raw is True:
        return DEFAULT_SEMANTIC
    if raw is False:
        return "off"
    value = raw.strip().lower()
    if value in ("", "1", "on", "true", "yes"):
        return DEFAULT_SEMANTIC
    if value in ("0", "false", "no", "none"):
        return "off"
    if value not in SEMANTIC_CHOICES:
        log.warning(
            "SLOWAVE_SEMANTIC=%r is not one of %s; using %s", raw, ", ".join(SEMANTIC_CHOICES), DEFAULT_SEMANTIC
        )
        return DEFAULT_SEMANTIC
    return value


@dataclass(frozen=True)
class RetrievalLimits:
    """Server-owned catalog and page limits (behaviour §5.4)."""

    catalog_memories: int = 50
    catalog_procedures: int = 9
    page_procedures: int = 3
    memory_page_budget_bytes: int = 12 * 1024
    procedure_page_budget_bytes: int = 24 * 1024
    lexical_candidates: int = 64
    """Newest matches taken when a cue has only common words (all of its rarest words must match)."""
    lexical_doc_budget: int = 128
    """Documents a query over the cue's rarest words may match, all of them scored; bounds its cost."""
    semantic_candidates: int = 16
    """Nearest memories by meaning taken as candidates; each costs a row read and its scoring on
    every Activate. Measured: 32 found what 100 did (LoCoMo dev evidence@1/5/10/20
    0.416/0.723/0.807/0.870 against 0.415/0.724/0.804/0.865), and 16 finds what 32 did (at retrieval
    v8: 0.464/0.779/0.847/0.901 against 0.464/0.777/0.846/0.903; the synthetic bench's semantic cells
    within 0.01) for 0.8 ms less per retrieval at 100k memories (in-process, 5.5 -> 4.7 ms)."""


@dataclass(frozen=True)
class Settings:
    listen_addr: str = "127.0.0.1:50051"
    """host:port the gRPC server binds (port 0 picks a free port)."""
    database_url: str = field(default_factory=_default_database_url)
    """SQLAlchemy URL; the default is a SQLite file in ./data."""
    metrics_addr: str = "127.0.0.1:9464"
    """host:port of the Prometheus /metrics endpoint; empty disables it."""
    session_idle_timeout: int = DEFAULT_IDLE_TIMEOUT
    """Seconds of inactivity before the reaper closes an open session; <= 0 disables the reaper."""
    processes: int = 1
    """Server processes sharing the port and the store (SLOWAVE_PROCESSES, default `auto`: one per
    core; the in-process `start_server` of tests serves in one). A process serves on one core at a
    time (the GIL)."""
    background_work: bool = True
    """This process runs the store's background work (reaper, consolidation, WAL checkpoints,
    gauges). With several processes only the first does, so it runs once per store."""
    max_workers: int = 16
    """Threads serving RPCs (per process)."""
    max_concurrent_rpcs: int = 64
    """RPCs in flight beyond this get RESOURCE_EXHAUSTED instead of queueing without bound."""
    shutdown_grace_seconds: float = 20.0
    """On SIGTERM, in-flight RPCs get this long to finish."""
    consolidation_poll_seconds: float = 1.0
    """How often the background consolidator looks for queued sessions."""
    gauge_refresh_seconds: float = 5.0
    """How often database-derived gauges (open sessions) are refreshed."""
    wal_checkpoint_seconds: float = 1.0
    """SQLite: how often the background checkpointer copies the write-ahead log into the database."""
    index_merge_seconds: float = 30.0
    """SQLite: how often the full-text index is merged into one segment when it has several
    (storage.index_merger)."""
    semantic: str = DEFAULT_SEMANTIC
    """The semantic retrieval channel: `static` (shipped static embeddings, no torch), `minilm`
    (all-MiniLM-L6-v2, needs the [semantic] extra) or `off` (lexical only)."""
    warm_scopes: int = 16
    """Before it serves, each process reads the vectors of this many of the most recently active
    scopes, so that their first requests do not wait for them (service.warm_up; 0: none)."""
    graph_dir: str | None = None
    """Where the dense graphs of large scopes are saved for the next start (slowave.dense_graph_files;
    SLOWAVE_GRAPH_DIR). None: beside a SQLite database (`<file>-graphs`), none on PostgreSQL; "off"
    saves none."""
    tenant: str = "local"
    """The single local tenant, used while no API key is configured or stored."""
    api_keys: tuple[KeyEntry, ...] = ()
    """Configured keys as (tenant, hash) pairs (SLOWAVE_API_KEYS_FILE, SLOWAVE_API_KEYS); never plaintext."""
    auth_cache_seconds: float = 5.0
    """How long a replica trusts a key lookup: revocation and tenant disabling apply within it."""
    allow_insecure_bind: bool = False
    """Serve a non-loopback address with neither API keys nor client certificates."""
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None
    """PEM file of the CAs whose client certificates are accepted; set → client certificates required."""
    tracing: bool = False
    """OpenTelemetry spans per RPC (slowave.tracing); on when the standard OTEL_EXPORTER_OTLP_ENDPOINT
    (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, which also names where spans are exported."""
    limits: RetrievalLimits = field(default_factory=RetrievalLimits)
    pool: PoolOptions = field(default_factory=PoolOptions)

    def graph_directory(self, sqlite_path: str | None) -> Path | None:
        """The directory `graph_dir` names for a store (`sqlite_path`: its SQLite file, if any)."""
        if self.graph_dir is None:
            return Path(f"{sqlite_path}-graphs") if sqlite_path else None
        if self.graph_dir.strip().lower() in ("", "off", "none"):
            return None
        return Path(self.graph_dir)

    @property
    def reaper_interval(self) -> float:
        """Sweep every min(120, max(1, timeout / 2)) seconds (behaviour §2.4)."""
        return float(min(120, max(1, self.session_idle_timeout / 2)))

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        kwargs: dict = {}
        if "SLOWAVE_LISTEN_ADDR" in env:
            kwargs["listen_addr"] = env["SLOWAVE_LISTEN_ADDR"]
        if env.get("SLOWAVE_DATABASE_URL"):
            kwargs["database_url"] = env["SLOWAVE_DATABASE_URL"]
        if "SLOWAVE_METRICS_ADDR" in env:
            kwargs["metrics_addr"] = env["SLOWAVE_METRICS_ADDR"]
        kwargs["session_idle_timeout"] = parse_idle_timeout(env.get("SLOWAVE_SESSION_IDLE_TIMEOUT"))
        if env.get("SLOWAVE_SEMANTIC"):
            kwargs["semantic"] = parse_semantic(env["SLOWAVE_SEMANTIC"])
        if env.get("SLOWAVE_GRAPH_DIR"):
            kwargs["graph_dir"] = env["SLOWAVE_GRAPH_DIR"]
        pool = {
            key: cast(env[var])
            for var, key, cast in (
                ("SLOWAVE_DB_POOL_SIZE", "size", int),
                ("SLOWAVE_DB_POOL_OVERFLOW", "overflow", int),
                ("SLOWAVE_DB_POOL_TIMEOUT", "timeout", float),
                ("SLOWAVE_DB_CONNECT_TIMEOUT", "connect_timeout", int),
                ("SLOWAVE_DB_POOL_RECYCLE", "recycle", int),
            )
            if env.get(var)
        }
        if pool:
            kwargs["pool"] = PoolOptions(**pool)
        kwargs["processes"] = parse_processes(env.get("SLOWAVE_PROCESSES") or "auto")
        if env.get("SLOWAVE_WARM_SCOPES"):
            kwargs["warm_scopes"] = int(env["SLOWAVE_WARM_SCOPES"])
        if env.get("SLOWAVE_MAX_WORKERS"):
            kwargs["max_workers"] = int(env["SLOWAVE_MAX_WORKERS"])
        if env.get("SLOWAVE_MAX_CONCURRENT_RPCS"):
            kwargs["max_concurrent_rpcs"] = int(env["SLOWAVE_MAX_CONCURRENT_RPCS"])
        kwargs["tracing"] = bool(
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
        kwargs.update(_security_from_env(env))
        return cls(**kwargs)


def parse_processes(value: str) -> int:
    """A positive count, or `auto` for one per core."""
    if value.strip().lower() == "auto":
        return cpu_count()
    count = int(value)
    if count < 1:
        raise ValueError(f"SLOWAVE_PROCESSES must be at least 1 (or auto), not {value!r}")
    return count


def cpu_count() -> int:
    """Cores this process may run on (a container's CPU set, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _security_from_env(env: dict[str, str]) -> dict:
    """API keys, TLS and the insecure-bind opt-in. Plaintext keys are hashed while parsing."""
    kwargs: dict = {}
    lists = []
    if env.get("SLOWAVE_API_KEYS_FILE"):
        path = env["SLOWAVE_API_KEYS_FILE"]
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise KeyConfigError(f"SLOWAVE_API_KEYS_FILE={path}: cannot read it ({exc.strerror})") from None
        lists.append(parse_key_config(text, path))
    if env.get("SLOWAVE_API_KEYS"):
        lists.append(parse_key_config(env["SLOWAVE_API_KEYS"], "SLOWAVE_API_KEYS"))
    if lists:
        kwargs["api_keys"] = merge_key_configs(*lists)
    if env.get("SLOWAVE_AUTH_CACHE_SECONDS"):
        kwargs["auth_cache_seconds"] = float(env["SLOWAVE_AUTH_CACHE_SECONDS"])
    if env.get("SLOWAVE_ALLOW_INSECURE_BIND"):
        kwargs["allow_insecure_bind"] = env["SLOWAVE_ALLOW_INSECURE_BIND"].strip().lower() in ("1", "on", "true", "yes")
    for var, key in (
        ("SLOWAVE_TLS_CERT_FILE", "tls_cert_file"),
        ("SLOWAVE_TLS_KEY_FILE", "tls_key_file"),
        ("SLOWAVE_TLS_CLIENT_CA_FILE", "tls_client_ca_file"),
    ):
        if env.get(var):
            kwargs[key] = env[var]
    return kwargs
