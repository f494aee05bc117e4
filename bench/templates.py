"""The vocabulary of the benchmark corpus: entity pools, slot drawers and memory templates.

A template is one kind of memory (its text with entity slots) plus the queries that ask for it:
PARAPHRASE queries word the entities through aliases ("the card charging backend" for
payments-api) and the predicate in other words; NAMING queries name exact identifiers (ticket ids,
ports, dates, versions, people). `{slot}` renders an entity's exact name, `{slot:a}` one of its
aliases. Evolving templates describe facts that change: `old_text` for superseded claims, `text`
for the current one.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

# ------------------------------------------------------------------------------------ entities


@dataclass(frozen=True)
class Entity:
    """A named thing: its exact identifier, and descriptive wordings used by paraphrase queries."""

    name: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Said:
    """An entity as one query words it: `{slot}` is the exact name, `{slot:a}` its alias number `alias`."""

    entity: Entity
    alias: int = 0

    def __format__(self, spec: str) -> str:
        if spec == "":
            return self.entity.name
        if spec == "a":
            if not self.entity.aliases:
                raise ValueError(f"{self.entity.name!r} has no alias")
            return self.entity.aliases[self.alias % len(self.entity.aliases)]
        raise ValueError(f"unknown slot format {spec!r}")


def _e(name: str, *aliases: str) -> Entity:
    return Entity(name, aliases)


SERVICES = [
    _e("payments-api", "the card charging backend", "the money movement component"),
    _e("checkout-web", "the storefront purchase frontend", "the shopping basket website"),
    _e("ledger-worker", "the bookkeeping background job", "the accounting batch processor"),
    _e("auth-gateway", "the sign-in front door", "the login proxy"),
    _e("search-indexer", "the catalogue crawler that feeds lookups", "the find-as-you-type ingestion job"),
    _e("notify-hub", "the email and push fan-out", "the outbound messaging component"),
    _e("inventory-sync", "the stock level replicator", "the warehouse quantity mirror"),
    _e("pricing-engine", "the component that computes what things cost", "the tariff calculator"),
    _e("user-profile", "the account details store", "the customer settings backend"),
    _e("report-builder", "the spreadsheet export generator", "the analytics PDF producer"),
    _e("media-transcoder", "the video conversion pipeline", "the clip re-encoding farm"),
    _e("fraud-scorer", "the risk model that flags suspicious orders", "the chargeback predictor"),
    _e("shipping-quotes", "the courier rate lookup", "the parcel delivery estimator"),
    _e("feature-flags", "the toggle configuration server", "the rollout switchboard"),
    _e("audit-trail", "the compliance event recorder", "the who-did-what log keeper"),
    _e("image-resizer", "the thumbnail maker", "the picture scaling worker"),
    _e("session-cache", "the logged-in state store", "the short-lived token memory"),
    _e("billing-cron", "the nightly invoicing scheduler", "the monthly statement runner"),
    _e("geo-lookup", "the address to coordinates resolver", "the location finder"),
    _e("chat-relay", "the realtime conversation bridge", "the live support message pipe"),
    _e("recs-service", "the you-might-also-like suggester", "the product suggestion model server"),
    _e("docs-portal", "the internal handbook website", "the developer manual site"),
    _e("kyc-verifier", "the identity document checker", "the know-your-customer screening step"),
    _e("metrics-agent", "the telemetry collector sidecar", "the statistics shipper"),
]
PEOPLE = [
    _e(n)
    for n in (
        "Priya Raman",
        "Marco Silva",
        "Chen Wei",
        "Amara Okafor",
        "Jonas Becker",
        "Sofia Marquez",
        "Kenji Tanaka",
        "Leila Haddad",
        "Tomasz Nowak",
        "Grace Mensah",
        "Ravi Iyer",
        "Elena Petrova",
        "Diego Alvarez",
        "Hannah Schmidt",
        "Yusuf Demir",
        "Aiko Suzuki",
        "Olivia Brown",
        "Mateo Rossi",
        "Nadia Karimi",
        "Lucas Dubois",
        "Ingrid Larsen",
        "Samuel Adeyemi",
        "Mei Lin",
        "Pavel Horak",
        "Fatima Zahra",
        "Noah Fischer",
        "Isabel Costa",
        "Arjun Mehta",
        "Zoe Campbell",
        "Viktor Novak",
        "Hiro Sato",
        "Clara Jensen",
        "Omar Farouk",
        "Lena Vogel",
        "Tariq Aziz",
        "Julia Kowalski",
        "Ethan Walker",
        "Rosa Moreno",
        "Felix Wagner",
        "Anya Volkova",
    )
]
TEAMS = [
    _e(f"Team {n}")
    for n in (
        "Falcon",
        "Orca",
        "Birch",
        "Quasar",
        "Nimbus",
        "Juniper",
        "Kestrel",
        "Basalt",
        "Meridian",
        "Tundra",
    )
]
ENVS = [
    _e("staging", "pre-production", "the rehearsal environment"),
    _e("production", "the live site", "the customer-facing environment"),
    _e("canary", "the early-traffic slice", "the first rollout ring"),
]
REGIONS = [
    _e("eu-west-1", "Ireland", "the Dublin datacenter"),
    _e("us-east-2", "Ohio", "the US Midwest"),
    _e("ap-southeast-1", "Singapore", "South-East Asia"),
    _e("eu-central-1", "Frankfurt", "Germany"),
    _e("us-west-2", "Oregon", "the Pacific Northwest"),
    _e("ca-central-1", "Montreal", "Canada"),
]
FEATURES = [
    _e("split tender", "paying with two cards at once", "dividing one purchase over several payment methods"),
    _e("guest checkout", "buying without an account", "anonymous purchases"),
    _e("bulk export", "downloading everything in one go", "mass data extraction"),
    _e("dark mode", "the night colour theme", "the low-light palette"),
    _e("one-click reorder", "repeating a previous purchase instantly", "instant repurchase"),
    _e("saved carts", "keeping a basket for later", "parked shopping baskets"),
    _e("address autocomplete", "street suggestions while typing", "predictive location entry"),
    _e("passkey login", "passwordless sign-in with device biometrics", "WebAuthn authentication"),
]
RUNTIMES = [
    _e(n)
    for n in (
        "Python 3.11.7",
        "Python 3.12.1",
        "Node.js 18.19.0",
        "Node.js 20.11.1",
        "Java 17.0.9",
        "Java 21.0.2",
        "Go 1.21.6",
        "Go 1.22.0",
        "Ruby 3.2.2",
        "Rust 1.75.0",
    )
]
POSTGRES = ["11", "12", "13", "14", "15", "16"]
REDIS = ["6.0.16", "6.2.14", "7.0.15", "7.2.4"]
CI_SYSTEMS = [_e(n) for n in ("Jenkins", "GitHub Actions", "GitLab CI", "Buildkite", "CircleCI")]
TIMEOUTS = ["5", "8", "10", "15", "20", "30", "45", "60"]


def draw_cast(rng: random.Random) -> dict[str, list[Entity]]:
    """One scope's cast: the entities its memories talk about (pools named as in CAST)."""
    return {
        "services": rng.sample(SERVICES, 8),
        "people": rng.sample(PEOPLE, 10),
        "teams": rng.sample(TEAMS, 4),
        "envs": list(ENVS),
        "regions": rng.sample(REGIONS, 4),
        "features": rng.sample(FEATURES, 5),
        "runtimes": rng.sample(RUNTIMES, 6),
    }


def _pick(*values: str) -> Callable[[random.Random, dict], str]:
    return lambda rng, _s: rng.choice(values)


def _svc(s: dict) -> str:
    return s["service"].entity.name


# Slot drawers: (rng, slots drawn so far) -> value. Values are Said (entities) or plain strings.
# Entity slots take from the scope's cast; slots marked UNIQUE never repeat inside a scope.
UNIQUE = {
    "port",
    "ticket",
    "date",
    "time",
    "channel",
    "dashid",
    "bucket",
    "host",
    "topic",
    "queue",
    "cfgpath",
    "vaultpath",
    "testpath",
    "prefix",
    "flag",
}
CAST = {
    "service": "services",
    "service2": "services",
    "person": "people",
    "person2": "people",
    "team": "teams",
    "env": "envs",
    "region": "regions",
    "feature": "features",
    "runtime": "runtimes",
}
DRAWERS: dict[str, Callable[[random.Random, dict], str]] = {
    "port": lambda rng, _s: str(rng.randint(1025, 65000)),
    "ticket": lambda rng, _s: f"{rng.choice(['INC', 'OPS', 'PAY', 'SEC', 'PLAT', 'ENG'])}-{rng.randint(100, 9999)}",
    "date": lambda rng, _s: (date(2023, 1, 1) + timedelta(days=rng.randint(0, 1000))).isoformat(),
    "time": lambda rng, _s: f"{rng.randint(0, 5):02d}:{rng.choice(['00', '15', '30', '45'])}",
    "channel": lambda rng, s: (
        f"#{_svc(s).split('-')[0]}-{rng.choice(['oncall', 'ops', 'dev', 'releases', 'alerts', 'team', 'help', 'eng'])}"
    ),
    "dashid": lambda rng, _s: "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(9)),
    "bucket": lambda rng, s: (
        f"acme-{_svc(s)}-{rng.choice(['uploads', 'attachments', 'blobs', 'files'])}-{rng.randint(1, 99)}"
    ),
    "host": lambda rng, _s: (
        f"{rng.choice(['node', 'worker', 'db', 'batch'])}-{rng.randint(1, 64):02d}.{rng.choice(REGIONS).name}"
    ),
    "topic": lambda rng, s: (
        f"{_svc(s).split('-')[0]}.{rng.choice(['events', 'changes', 'updates'])}.v{rng.randint(1, 4)}"
    ),
    "queue": lambda rng, s: f"{s['service2'].entity.name.split('-')[0]}.{rng.choice(['commands', 'requests', 'jobs'])}",
    "cfgpath": lambda rng, s: (
        f"deploy/{_svc(s)}/{rng.choice(['values-prod.yaml', 'settings.toml', 'app.conf', 'runtime.json'])}"
    ),
    "vaultpath": lambda rng, s: f"kv/{_svc(s)}/{rng.choice(['prod', 'shared', 'runtime'])}",
    "testpath": lambda rng, s: f"tests/{_svc(s).replace('-', '_')}/{rng.choice(['unit', 'api', 'integration'])}/",
    "prefix": lambda rng, s: f"{_svc(s).split('-')[0][:4]}{rng.choice(['svc', 'app', 'x', 'core'])}",
    "flag": lambda rng, s: (
        f"{rng.choice(['enable', 'use', 'rollout'])}_{s['feature'].entity.name.replace(' ', '_').replace('-', '_')}_v{rng.randint(2, 5)}"
    ),
    "partitions": _pick("6", "12", "24", "32", "48"),
    "slo": _pick("99.5", "99.9", "99.95", "99.99"),
    "minutes": _pick("12", "25", "40", "55", "90"),
    "pct": _pick("1", "5", "10", "25", "50"),
    "days": _pick("14", "30", "90", "180", "400"),
    "major": _pick("1", "2", "3", "4"),
    "ca": _pick("Vault PKI", "cert-manager", "AWS Private CA", "step-ca"),
    "ttl": _pick("15", "60", "120", "300", "900"),
    "code": _pick("409", "412", "422", "428"),
    "weekday": _pick("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    "mib": _pick("256", "384", "512", "768", "1024", "1536"),
    "ms": _pick("150", "200", "250", "400", "750", "1200"),
    "pool": _pick("10", "20", "25", "40"),
    "pool2": lambda _rng, s: str(int(s["pool"]) * 4),
    "loadtool": _pick("k6", "Locust", "Gatling", "Vegeta"),
    "warm": _pick("2", "3", "4", "6", "8"),
    "engine": _pick("Postgres", "MySQL", "CockroachDB"),
    "deploytool": _pick("ArgoCD", "Spinnaker", "Flux", "GitHub Actions"),
    "render": _pick("Helm", "Kustomize", "Jsonnet", "envsubst"),
    "pkgmgr": _pick("pnpm", "yarn", "bun"),
    "lead": _pick("15", "30", "60", "120"),
    "docfmt": _pick("Mermaid", "PlantUML", "Excalidraw", "draw.io"),
}

# ----------------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class Template:
    """One kind of memory. `unique` slots tell instances apart (what paraphrase queries identify).

    An evolving template (`value` set) stores old claims with `old_text` and the current claim with
    `text`; `value` names the slot whose value changes and `values` its pool (`ordered`: upgrades
    only go up).
    """

    key: str
    type: str
    text: str
    paraphrases: tuple[str, ...]
    namings: tuple[str, ...]
    unique: tuple[str, ...] = ("service",)
    restate: str | None = None
    old_text: str | None = None
    value: str | None = None
    values: tuple | None = None
    ordered: bool = False

    @property
    def evolving(self) -> bool:
        return self.old_text is not None

    def slot_names(self) -> list[str]:
        texts = [self.text, self.old_text or "", self.restate or "", *self.paraphrases, *self.namings]
        found = {m for t in texts for m in re.findall(r"\{(\w+)(?::a)?\}", t)}
        order = ["service", "service2", "feature", "pool", *sorted(found)]
        return [s for s in dict.fromkeys(order) if s in found and s != self.value]


def T(key: str, type_: str, text: str, paraphrases: list[str], namings: list[str], **kw) -> Template:
    return Template(key, type_, text, tuple(paraphrases), tuple(namings), **kw)


TEMPLATES: list[Template] = [
    # ---- facts
    T(
        "fact.port",
        "fact",
        "{service} listens on port {port} in {env}.",
        [
            "Which socket number do I dial to reach {service:a} in {env:a}?",
            "To talk to {service:a} within {env:a}, what TCP endpoint number should a client use?",
            "What numeric address slot accepts connections for {service:a} inside {env:a}?",
        ],
        ["What listens on port {port}?", "Which service is bound to {port} in {env}?", "Who is using port {port}?"],
        unique=("service", "env"),
        restate="In {env} the {service} port is {port}.",
    ),
    T(
        "fact.runtime",
        "fact",
        "{service} is built and run on {runtime}.",
        [
            "What interpreter or VM release executes {service:a}?",
            "Which language toolchain generation does {service:a} depend on?",
        ],
        ["Which service runs on {runtime}?", "Is anything still on {runtime}?"],
        restate="Runtime of {service}: {runtime}.",
    ),
    T(
        "fact.config",
        "fact",
        "The main configuration of {service} lives in {cfgpath} and is rendered by {render} at deploy time.",
        [
            "Where are the tunable settings for {service:a} defined?",
            "Which document do I edit to change options of {service:a}?",
        ],
        ["What is {cfgpath}?", "Which service reads {cfgpath}?"],
    ),
    T(
        "fact.topic",
        "fact",
        "{service} publishes change events to the Kafka topic {topic} with {partitions} partitions.",
        [
            "Where does {service:a} emit notifications that other consumers can subscribe to?",
            "Which stream should I listen to for updates coming out of {service:a}?",
        ],
        ["Who produces to {topic}?", "How many partitions does {topic} have?"],
    ),
    T(
        "fact.dashboard",
        "fact",
        "The {service} Grafana dashboard has uid {dashid}; its availability SLO is {slo}%.",
        [
            "Where can I watch health graphs for {service:a}, and what uptime target applies?",
            "Which monitoring board shows {service:a} and how reliable must it be?",
        ],
        ["Which dashboard has uid {dashid}?", "What is dashboard {dashid}?"],
    ),
    T(
        "fact.bucket",
        "fact",
        "{service} stores user uploads in the S3 bucket {bucket} in {region}.",
        [
            "Where do files that customers send to {service:a} end up?",
            "Which object storage container keeps attachments received by {service:a}?",
        ],
        ["What is kept in {bucket}?", "Which region is {bucket} in?"],
    ),
    T(
        "fact.batch",
        "fact",
        "The nightly {service} batch starts at {time} UTC and usually takes {minutes} minutes.",
        [
            "When does the overnight job of {service:a} kick off, and how long does it run?",
            "At what hour does {service:a} do its scheduled bulk processing?",
        ],
        ["What kicks off at {time} UTC?", "Which batch starts at {time}?"],
    ),
    T(
        "fact.flag",
        "fact",
        "Feature flag {flag} gates {feature} in {service}; it is enabled for {pct}% of users.",
        [
            "How much of the audience currently sees {feature:a} in {service:a}?",
            "Which toggle controls {feature:a} for {service:a}, and how far is it rolled out?",
        ],
        ["What does {flag} control?", "Who is {flag} enabled for?"],
        unique=("service", "feature"),
    ),
    T(
        "fact.leak",
        "fact",
        "Ticket {ticket} tracks the memory leak in {service} worker processes; it is assigned to {person}.",
        [
            "Is anybody already chasing why {service:a} slowly eats RAM?",
            "Where is the steady heap growth of {service:a} being followed up, and by whom?",
        ],
        ["What is {ticket} about?", "Who is assigned {ticket}?"],
    ),
    # ---- decisions
    T(
        "decision.webhooks",
        "decision",
        "Decision {ticket}: {service} replaces REST polling with signed webhooks; approved by {person}.",
        [
            "How will {service:a} learn about remote changes instead of asking over and over?",
            "What push-style mechanism took over from periodic fetching in {service:a}?",
        ],
        ["What was decided in {ticket}?", "What did {person} approve for {service}?"],
    ),
    T(
        "decision.deploy_tool",
        "decision",
        "{service} deploys move to {deploytool} starting {date}, as agreed by {team}.",
        [
            "What rollout mechanism did we settle on for shipping {service:a}?",
            "How are releases of {service:a} going to be pushed out going forward?",
        ],
        ["What changes for {service} on {date}?", "What did {team} agree about {service}?"],
    ),
    T(
        "decision.db_choice",
        "decision",
        "We chose {engine} over MongoDB for {service} because it needs multi-row transactions.",
        [
            "Why isn't a document store used by {service:a}?",
            "What justified picking a relational engine for {service:a}?",
        ],
        ["Why was MongoDB rejected for {service}?", "Why does {service} use {engine}?"],
    ),
    T(
        "decision.versioning",
        "decision",
        "The {service} API is versioned in the URL path (/v{major}/); header-based versioning was rejected in {ticket}.",
        [
            "How do clients of {service:a} pick which contract revision they talk to?",
            "Is the interface revision of {service:a} selected through request metadata or the address?",
        ],
        ["What did {ticket} reject?", "Does {service} expose /v{major}/ routes?"],
    ),
    T(
        "decision.retention",
        "decision",
        "{service} logs are retained for {days} days in {region}, agreed with legal on {date}.",
        [
            "How long do we keep diagnostic output from {service:a} before it gets deleted?",
            "What is the deletion horizon for records written by {service:a} while running?",
        ],
        ["What did legal agree on {date}?", "How long are {service} logs kept?"],
        restate="Retention for {service} logs: {days} days ({region}).",
    ),
    T(
        "decision.rollback",
        "decision",
        "Per {ticket}, rollbacks of {service} redeploy the previous image tag; helm rollback is not used.",
        [
            "How should I revert a bad release of {service:a}?",
            "What is the approved way to undo a broken ship of {service:a}?",
        ],
        ["What does {ticket} say?", "Can I use helm rollback on {service}?"],
    ),
    T(
        "decision.auth",
        "decision",
        "Service-to-service calls into {service} authenticate with mTLS certificates issued by {ca}; shared API keys were retired in {ticket}.",
        [
            "How do other backends prove who they are when contacting {service:a}?",
            "What credential mechanism must internal callers present to {service:a} now?",
        ],
        ["What did {ticket} retire?", "Who issues the certificates for {service}?"],
    ),
    T(
        "decision.cache",
        "decision",
        "{service} caches responses for {ttl} seconds in Redis; {person} decided against in-process caching.",
        [
            "How long may answers from {service:a} be reused before recomputing?",
            "Why don't we memoise results locally within each instance of {service:a}?",
        ],
        ["What did {person} decide about caching?", "What is the cache TTL of {service}?"],
    ),
    # ---- constraints
    T(
        "constraint.no_sync",
        "constraint",
        "{service} must never call {service2} synchronously; it goes through the {queue} queue instead.",
        [
            "Can {service:a} wait on a direct reply from {service2:a}?",
            "Is a blocking request from {service:a} to {service2:a} allowed?",
        ],
        ["What is the {queue} queue for?", "May {service} call {service2} directly?"],
        unique=("service", "service2"),
    ),
    T(
        "constraint.idempotency",
        "constraint",
        "Every write to {service} needs an Idempotency-Key header; requests without it get HTTP {code}.",
        [
            "What happens if a client of {service:a} retries a mutation with no dedup token?",
            "Which guard keeps {service:a} from processing the same change twice?",
        ],
        ["Why does {service} answer {code}?", "When does {service} return {code}?"],
    ),
    T(
        "constraint.freeze",
        "constraint",
        "Deploys of {service} are frozen on {weekday}s after {time} UTC because of settlement runs.",
        ["When am I not allowed to ship {service:a}?", "Is there a blackout window for releasing {service:a}?"],
        ["Can I deploy {service} on {weekday} evening?", "What is blocked after {time} UTC?"],
    ),
    T(
        "constraint.memory",
        "constraint",
        "The {service} container must stay under {mib} MiB of memory or the node evicts it.",
        [
            "How much RAM can {service:a} consume before Kubernetes kills the pod?",
            "What is the working-set ceiling for {service:a}?",
        ],
        ["Which container has a {mib} MiB limit?", "What is the memory limit of {service}?"],
        restate="{service} memory limit: {mib} MiB.",
    ),
    T(
        "constraint.residency",
        "constraint",
        "Personal data handled by {service} must stay in {region}; {ticket} forbids replicating it elsewhere.",
        [
            "Where may customer PII processed by {service:a} physically live?",
            "Can we copy user records from {service:a} to another geography?",
        ],
        ["What does {ticket} forbid?", "Is {service} data allowed outside {region}?"],
    ),
    T(
        "constraint.latency",
        "constraint",
        "The p99 latency budget of {service} is {ms} ms; anything slower pages {team}.",
        [
            "How fast must {service:a} answer for the slowest one percent of calls?",
            "What tail response time triggers an alert for {service:a}, and who hears about it?",
        ],
        ["Which service has a {ms} ms budget?", "What is the p99 budget of {service}?"],
    ),
    T(
        "constraint.approvers",
        "constraint",
        "Only {person} and {person2} may approve schema migrations for {service}.",
        [
            "Who can sign off database structure changes in {service:a}?",
            "Whose consent does a table alteration on {service:a} require?",
        ],
        ["Which migrations can {person} and {person2} approve?", "Who approves {service} schema migrations?"],
    ),
    T(
        "constraint.secrets",
        "constraint",
        "Secrets for {service} are read from Vault at {vaultpath} and must never appear in environment files.",
        ["Where do I fetch credentials for {service:a}?", "How should {service:a} obtain its passwords and tokens?"],
        ["What is stored at {vaultpath}?", "Where are the {service} secrets?"],
    ),
    # ---- lessons
    T(
        "lesson.pool",
        "lesson",
        "Lesson from {ticket}: {service} exhausted its database connections while the pgbouncer pool size was {pool}; raising it to {pool2} ended the outage.",
        [
            "Why did {service:a} go down when it could not open new links to its store?",
            "What fixed the incident where {service:a} starved for DB sessions?",
        ],
        ["What was the root cause of {ticket}?", "Why does {service} need a pool of {pool2}?"],
    ),
    T(
        "lesson.jitter",
        "lesson",
        "After {ticket} we learned that {service} retries without jitter cause thundering herds against {service2}.",
        [
            "Why must back-off delays in {service:a} be randomised?",
            "What went wrong when {service:a} hammered {service2:a} in synchronised waves?",
        ],
        ["What did we learn from {ticket}?", "Why does {service} need jitter against {service2}?"],
        unique=("service", "service2"),
    ),
    T(
        "lesson.clock",
        "lesson",
        "Clock skew on {host} broke token validation in {service} on {date}; check NTP first when signatures fail.",
        [
            "Why did sign-in checks in {service:a} start failing although the keys were fine?",
            "What should I verify first if {service:a} treats valid credentials as expired?",
        ],
        ["What went wrong on {host}?", "What broke in {service} on {date}?"],
    ),
    T(
        "lesson.tls",
        "lesson",
        "The {date} outage of {service} was caused by an expired TLS certificate; renewals are now automated with cert-manager.",
        [
            "Why was {service:a} unreachable that day, and what prevents it recurring?",
            "What took {service:a} offline when its encryption credential lapsed?",
        ],
        ["What caused the {date} outage?", "Did an expired TLS certificate take {service} down?"],
    ),
    T(
        "lesson.loadtest",
        "lesson",
        "Load tests of {service} with {loadtool} showed the bottleneck is JSON serialisation, not the database; profile before scaling it.",
        [
            "What actually limited throughput of {service:a} under heavy synthetic traffic?",
            "Should we add storage capacity first when {service:a} slows down under stress?",
        ],
        ["What did the {loadtool} run against {service} show?", "Is JSON serialisation the {service} bottleneck?"],
    ),
    T(
        "lesson.coldstart",
        "lesson",
        "Moving {service} to {runtime} doubled cold-start time; keep a warm pool of {warm} instances.",
        [
            "Why are startups of {service:a} slow since the upgrade, and how many pre-started copies should stay ready?",
            "How do we hide the slow boot of {service:a}?",
        ],
        ["What happened after moving {service} to {runtime}?", "Why does {service} keep {warm} warm instances?"],
    ),
    T(
        "lesson.mocks",
        "lesson",
        "Mocking {service2} in the {service} test suite hid a contract break ({ticket}); use the shared contract tests instead.",
        [
            "Why are fake stand-ins for {service2:a} discouraged when verifying {service:a}?",
            "What kind of checks catch interface drift between {service:a} and {service2:a}?",
        ],
        ["What did {ticket} reveal?", "Should I mock {service2} in {service} tests?"],
        unique=("service", "service2"),
    ),
    T(
        "lesson.debuglog",
        "lesson",
        "The disk on {host} filled up because {service} debug logging was left on after {ticket}; always revert log levels.",
        [
            "Why did a machine running {service:a} run out of storage space?",
            "What verbose output setting must be switched back after investigating {service:a}?",
        ],
        ["Why did {host} fill up?", "What was left on after {ticket}?"],
    ),
    # ---- preferences
    T(
        "preference.pkgmgr",
        "preference",
        "In {service} the user prefers {pkgmgr} over npm and wants lockfiles committed.",
        [
            "Which JavaScript dependency installer should I run for {service:a}?",
            "How do I add a library to {service:a} the way the owner likes?",
        ],
        ["Does {service} use {pkgmgr}?", "Should I run npm in {service}?"],
    ),
    T(
        "preference.contact",
        "preference",
        "{person} prefers to be contacted about {service} in the Slack channel {channel}, not by email.",
        [
            "What is the best way to reach whoever looks after {service:a}?",
            "How do I ping someone about problems with {service:a} without mailing them?",
        ],
        ["Who reads {channel}?", "What is {channel} for?"],
    ),
    T(
        "preference.merge",
        "preference",
        "For {service}, maintainers prefer squash merges with conventional commit messages (feat:, fix:).",
        [
            "How should my branch be folded into trunk on {service:a}?",
            "What style of history do the people who look after {service:a} want?",
        ],
        ["Do we squash merge in {service}?", "Does {service} use conventional commits?"],
    ),
    T(
        "preference.tests",
        "preference",
        "The user prefers pytest fixtures over unittest setUp in {service}, with tests under {testpath}.",
        [
            "What style should I follow when adding automated checks to {service:a}?",
            "Where and how do verifications for {service:a} get written?",
        ],
        ["What goes in {testpath}?", "Does {service} use unittest?"],
    ),
    T(
        "preference.announce",
        "preference",
        "{person} wants {service} rollouts announced in {channel} at least {lead} minutes beforehand.",
        [
            "How much warning should I give before shipping {service:a}, and where?",
            "Where do I tell people ahead of time that a new version of {service:a} is going out?",
        ],
        ["What gets announced in {channel}?", "What does {person} want before {service} rollouts?"],
    ),
    T(
        "preference.metrics",
        "preference",
        "The user prefers {service} metric names in snake_case with the {prefix}_ prefix.",
        [
            "How should I name new time series emitted by {service:a}?",
            "What naming convention do the owners want for telemetry counters of {service:a}?",
        ],
        ["What is the {prefix}_ prefix for?", "Which prefix do {service} metrics use?"],
    ),
    T(
        "preference.postmortem",
        "preference",
        "For {service} incidents, {person} prefers a written timeline in the postmortem doc before any call.",
        [
            "How does the incident lead want outages of {service:a} reviewed: meeting first or document first?",
            "What should I prepare after {service:a} breaks, before getting everyone on a bridge?",
        ],
        ["What does {person} want after {service} incidents?", "Who wants a written timeline for {service}?"],
    ),
    T(
        "preference.docs",
        "preference",
        "The user prefers {service} documentation to use ISO dates (YYYY-MM-DD) and {docfmt} diagrams.",
        [
            "How should I format calendar days and drawings in the handbook for {service:a}?",
            "What conventions apply to write-ups about {service:a}?",
        ],
        ["Does {service} use {docfmt}?", "Which diagram tool do {service} docs use?"],
    ),
    # ---- changing facts: old claims first, the current claim later
    T(
        "evolving.postgres",
        "fact",
        "{service} was upgraded on {date} and now uses Postgres {value}.",
        [
            "Which release of the relational database backs {service:a} at present?",
            "What major generation of the SQL engine sits under {service:a} today?",
        ],
        ["What Postgres version does {service} use?", "What was upgraded on {date}?"],
        old_text="{service} uses Postgres {value}.",
        value="value",
        values=tuple(POSTGRES),
        ordered=True,
    ),
    T(
        "evolving.oncall",
        "fact",
        "Since {date}, {value} is the on-call owner of {service}.",
        ["Whom do I page when {service:a} breaks?", "Who currently carries the pager for {service:a}?"],
        ["Who is on call for {service}?", "What changed on {date} for on-call?"],
        old_text="{value} is the on-call owner of {service}.",
        value="value",
        values=tuple(PEOPLE),
    ),
    T(
        "evolving.timeout",
        "fact",
        "The {service} HTTP client timeout was changed to {value} seconds in {ticket}.",
        [
            "How long does {service:a} wait for an upstream reply before giving up?",
            "What is the patience limit of {service:a} on slow outbound calls?",
        ],
        ["What is the HTTP client timeout of {service}?", "What did {ticket} change?"],
        old_text="The {service} HTTP client timeout is {value} seconds.",
        value="value",
        values=tuple(TIMEOUTS),
    ),
    T(
        "evolving.ci",
        "decision",
        "As of {date}, {service} is built and deployed by {value}.",
        [
            "What automation compiles and ships {service:a}?",
            "Which pipeline system produces release artefacts for {service:a}?",
        ],
        ["Which CI builds {service}?", "What CI change happened on {date}?"],
        old_text="{service} is built and deployed by {value}.",
        value="value",
        values=tuple(CI_SYSTEMS),
    ),
    T(
        "evolving.region",
        "decision",
        "{service} was migrated to {value} on {date}.",
        [
            "In which geography do the servers of {service:a} run now?",
            "Where physically is {service:a} deployed these days?",
        ],
        ["Which AWS region hosts {service}?", "What was migrated on {date}?"],
        old_text="{service} is hosted in {value}.",
        value="value",
        values=tuple(REGIONS),
    ),
    T(
        "evolving.redis",
        "fact",
        "The {service} cache was upgraded to Redis {value} in {ticket}.",
        [
            "What release of the key-value store does {service:a} keep its hot data in?",
            "Which in-memory datastore generation backs the lookups of {service:a}?",
        ],
        ["What Redis version does the {service} cache run?", "What did {ticket} upgrade?"],
        old_text="The {service} cache runs Redis {value}.",
        value="value",
        values=tuple(REDIS),
        ordered=True,
    ),
    T(
        "evolving.admin_port",
        "fact",
        "The {service} admin endpoint moved to port {value} in {ticket}.",
        [
            "Where do I reach the management interface of {service:a}?",
            "Which number exposes the operator console of {service:a}?",
        ],
        ["Which port is the {service} admin endpoint on?", "What moved in {ticket}?"],
        old_text="The {service} admin endpoint is on port {value}.",
        value="value",
        values=None,
    ),
]

PROJECTS = [
    "atlas",
    "borealis",
    "cobalt",
    "dynamo",
    "ember",
    "fjord",
    "granite",
    "helix",
    "indigo",
    "jasper",
    "kepler",
    "lumen",
    "monsoon",
    "nebula",
    "onyx",
    "prairie",
    "quartz",
    "rivet",
    "sierra",
    "tempest",
    "umber",
    "vortex",
    "willow",
    "xenon",
]
