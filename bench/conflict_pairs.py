"""Held-out pairs for bench/conflicts.py: written after the rule of domain/near_duplicates.py was
settled on the synthetic corpus, and never used to change it. Each pair is (older, newer): the
first list holds newer versions of the same fact, the second distinct claims worded alike (both
can hold at once), the third restatements (the same fact in other words). Varied on purpose:
other subjects than services, values in other places, other wordings of the change."""

from __future__ import annotations

CHANGES: list[tuple[str, str]] = [
    (
        "The API rate limit for partner accounts is 500 requests per minute.",
        "The API rate limit for partner accounts is 1200 requests per minute.",
    ),
    ("orders-db runs on PostgreSQL 14.9.", "orders-db now runs on PostgreSQL 16.2 after the March upgrade."),
    (
        "Our Terraform state lives in the bucket tf-state-prod-1.",
        "Our Terraform state lives in the bucket tf-state-prod-2.",
    ),
    ("The mobile app targets iOS 16 as its minimum version.", "The mobile app targets iOS 17 as its minimum version."),
    ("Anna Berg leads the data platform team.", "Jonas Weber leads the data platform team."),
    ("The release train leaves every 2 weeks.", "The release train leaves every 3 weeks."),
    ("We pin numpy to 1.26.4 in the analytics image.", "We pin numpy to 2.1.0 in the analytics image."),
    ("The staging cluster has 6 nodes.", "The staging cluster was scaled to 10 nodes."),
    ("The support rotation is owned by Team Orion.", "The support rotation is owned by Team Vega."),
    ("The default branch of infra-live is master.", "The default branch of infra-live is main."),
    ("search-api exposes metrics on port 9100.", "search-api exposes metrics on port 9464 since the exporter change."),
    ("Backups of billing-db are kept for 14 days.", "Backups of billing-db are kept for 35 days."),
    (
        "The code freeze for the Q3 release starts on 2025-09-15.",
        "The code freeze for the Q3 release starts on 2025-09-22.",
    ),
    ("The web frontend is built with Node.js 18.", "The web frontend is built with Node.js 20."),
    ("Payments settle through Adyen.", "Payments settle through Stripe."),
    ("The nightly ETL job starts at 02:00 UTC.", "The nightly ETL job starts at 03:30 UTC."),
    (
        "The gateway certificate expires on 2025-11-30.",
        "The gateway certificate was renewed and expires on 2026-11-30.",
    ),
    ("The max upload size on media-svc is 25 MB.", "The max upload size on media-svc is 100 MB."),
    ("The primary region of the ledger is eu-central-1.", "The primary region of the ledger is eu-west-1."),
    ("Java services use Spring Boot 2.7.", "Java services use Spring Boot 3.2."),
    ("The on-call escalation contact is Maria Lopez.", "The on-call escalation contact is Tom Richter."),
    ("Kafka retention for the audit topic is 7 days.", "Kafka retention for the audit topic is 30 days."),
    ("The SLO for checkout availability is 99.9%.", "The SLO for checkout availability is 99.95%."),
    ("Docs are published with MkDocs.", "Docs are published with Docusaurus."),
    (
        "The connection pool of reports-api allows 20 connections.",
        "The connection pool of reports-api allows 50 connections.",
    ),
]

DISTINCT: list[tuple[str, str]] = [
    (
        "The API rate limit for partner accounts is 500 requests per minute.",
        "The API rate limit for free accounts is 60 requests per minute.",
    ),
    ("orders-db runs on PostgreSQL 14.9.", "users-db runs on PostgreSQL 16.2."),
    ("Anna Berg leads the data platform team.", "Anna Berg leads the weekly architecture review."),
    ("The staging cluster has 6 nodes.", "The production cluster has 24 nodes."),
    ("Backups of billing-db are kept for 14 days.", "Backups of orders-db are kept for 14 days."),
    ("search-api exposes metrics on port 9100.", "search-api exposes health checks on port 8081."),
    ("The web frontend is built with Node.js 18.", "The admin frontend is built with Node.js 20."),
    ("The nightly ETL job starts at 02:00 UTC.", "The weekly report job starts at 06:00 UTC."),
    ("The max upload size on media-svc is 25 MB.", "The max upload size on docs-svc is 10 MB."),
    ("Kafka retention for the audit topic is 7 days.", "Kafka retention for the clickstream topic is 2 days."),
    (
        "The connection pool of reports-api allows 20 connections.",
        "The connection pool of search-api allows 20 connections.",
    ),
    ("We pin numpy to 1.26.4 in the analytics image.", "We pin pandas to 2.2.2 in the analytics image."),
    ("The support rotation is owned by Team Orion.", "The release process is owned by Team Orion."),
    (
        "The mobile app targets iOS 16 as its minimum version.",
        "The mobile app targets Android 12 as its minimum version.",
    ),
    ("Payments settle through Adyen.", "Refunds are issued through Adyen."),
    (
        "The code freeze for the Q3 release starts on 2025-09-15.",
        "The code freeze for the Q4 release starts on 2025-12-08.",
    ),
    ("The primary region of the ledger is eu-central-1.", "The disaster recovery region of the ledger is eu-west-1."),
    ("Java services use Spring Boot 2.7.", "Kotlin services use Ktor 2.3."),
    ("The SLO for checkout availability is 99.9%.", "The SLO for search availability is 99.5%."),
    ("Maria Lopez approves database migrations for billing-db.", "Maria Lopez approves schema changes for orders-db."),
    ("The gateway certificate expires on 2025-11-30.", "The VPN certificate expires on 2025-08-31."),
    (
        "Errors from checkout-web go to the #checkout-alerts channel.",
        "Errors from search-web go to the #search-alerts channel.",
    ),
    ("The default branch of infra-live is master.", "The default branch of app-config is main."),
    ("Docs are published with MkDocs.", "Slides are published with reveal.js."),
    ("The release train leaves every 2 weeks.", "The security review happens every 2 weeks."),
]

RESTATED: list[tuple[str, str]] = [
    ("orders-db runs on PostgreSQL 14.9.", "PostgreSQL 14.9 is the engine behind orders-db."),
    ("Backups of billing-db are kept for 14 days.", "billing-db backups: 14 days of retention."),
    ("search-api exposes metrics on port 9100.", "Metrics for search-api are served on port 9100."),
    ("Anna Berg leads the data platform team.", "The data platform team is led by Anna Berg."),
    ("The nightly ETL job starts at 02:00 UTC.", "At 02:00 UTC the nightly ETL job starts."),
    ("Kafka retention for the audit topic is 7 days.", "The audit topic in Kafka keeps messages for 7 days."),
    ("The max upload size on media-svc is 25 MB.", "media-svc accepts uploads of at most 25 MB."),
    ("Payments settle through Adyen.", "Adyen is what payments settle through."),
    ("We pin numpy to 1.26.4 in the analytics image.", "The analytics image pins numpy 1.26.4."),
    ("The staging cluster has 6 nodes.", "There are 6 nodes in the staging cluster."),
]
