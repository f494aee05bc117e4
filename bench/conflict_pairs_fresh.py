"""Blind held-out set of claim pairs for conflict (replacement) detection.

Written on 2026-12-02 without reading the detection rule, its tests or the
existing benchmark pairs: only the task description was known.

CHANGES: (older, newer) where newer is a new version of the same fact.
DISTINCT: worded alike, but both can be true at once; must NOT be flagged.
RESTATEMENTS: the same fact with the same values, in other words.
"""

CHANGES: list[tuple[str, str]] = [
    # identical frame, value swapped
    ("The payments-api service listens on port 8080.", "The payments-api service listens on port 9090."),
    ("Max upload size for the media bucket is 25 MB.", "Max upload size for the media bucket is 50 MB."),
    ("the nightly backup job runs at 02:00 utc", "the nightly backup job runs at 03:30 utc"),
    ("Team Falcon's sprint length is two weeks.", "Team Falcon's sprint length is three weeks."),
    ("We pin Node.js to version 18.17.1 in CI.", "We pin Node.js to version 20.11.0 in CI."),
    ("Acme Corp's contract renewal date is 2027-03-15.", "Acme Corp's contract renewal date is 2027-06-30."),
    (
        "The on-call rotation for the data team is owned by Priya Shah.",
        "The on-call rotation for the data team is owned by Marcus Lee.",
    ),
    ("primary database region is us-east-1", "primary database region is eu-west-1"),
    ("The Q3 marketing budget is $120,000.", "The Q3 marketing budget is $95,000."),
    ("Retention for application logs is 30 days.", "Retention for application logs is 90 days."),
    ("The default branch of the infra repo is master.", "The default branch of the infra repo is main."),
    ("feature flag new_checkout is disabled in production", "feature flag new_checkout is enabled in production"),
    (
        "The weekly sync with the design team is on Tuesdays at 10am.",
        "The weekly sync with the design team is on Thursdays at 10am.",
    ),
    (
        "Config for the ingest worker lives at /etc/ingest/config.yaml.",
        "Config for the ingest worker lives at /opt/ingest/conf/config.yaml.",
    ),
    ("The staging cluster runs Kubernetes 1.27.", "The staging cluster runs Kubernetes 1.29."),
    (
        "API rate limit for free-tier customers is 100 requests per minute.",
        "API rate limit for free-tier customers is 60 requests per minute.",
    ),
    (
        "Error budget for the search service is 0.5% per month.",
        "Error budget for the search service is 0.1% per month.",
    ),
    ("We use Jenkins for CI on the mobile apps.", "We use GitHub Actions for CI on the mobile apps."),
    (
        "The internal docs site is hosted at docs.internal.example.com.",
        "The internal docs site is hosted at wiki.corp.example.net.",
    ),
    ("Dependency audits happen monthly.", "Dependency audits happen weekly."),
    ("Build server ci-runner-03 has 16 GB of RAM.", "Build server ci-runner-03 has 64 GB of RAM."),
    ("the release freeze starts on 12 december", "the release freeze starts on 5 december"),
    ("Session timeout for the admin console is 15 minutes.", "Session timeout for the admin console is 45 minutes."),
    ("Globex's account manager is Dana Whitfield.", "Globex's account manager is Tomás Rivera."),
    ("The mobile team targets a crash-free rate of 99.5%.", "The mobile team targets a crash-free rate of 99.8%."),
    ("Our Postgres connection pool size is 20 per pod.", "Our Postgres connection pool size is 50 per pod."),
    (
        "The legal review of the privacy policy is due March 3, 2027.",
        "The legal review of the privacy policy is due April 14, 2027.",
    ),
    ("Grafana dashboards refresh every 30s.", "Grafana dashboards refresh every 5s."),
    ("The cache TTL for product pages is 600 seconds.", "The cache TTL for product pages is 120 seconds."),
    ("Deploys to production require 2 approvals.", "Deploys to production require 1 approval."),
    (
        "the hiring plan for platform engineering is 4 engineers in 2027",
        "the hiring plan for platform engineering is 6 engineers in 2027",
    ),
    ("Python services use ruff 0.4.2 for linting.", "Python services use ruff 0.6.9 for linting."),
    (
        "The quarterly all-hands happens in room Orion on floor 3.",
        "The quarterly all-hands happens in room Vega on floor 3.",
    ),
    (
        "The Redis instance for sessions is redis-sessions-01.prod.local.",
        "The Redis instance for sessions is redis-sessions-02.prod.local.",
    ),
    (
        "Customer Initech pays €4,500 per month for the enterprise plan.",
        "Customer Initech pays €5,200 per month for the enterprise plan.",
    ),
    ("default log level for the gateway is info", "default log level for the gateway is debug"),
    (
        "The SLA for P1 incidents is a response within 1 hour.",
        "The SLA for P1 incidents is a response within 30 minutes.",
    ),
    ("Laptop refresh cycle for engineers is every 3 years.", "Laptop refresh cycle for engineers is every 4 years."),
    (
        "The webhook endpoint for Stripe events is https://api.example.com/hooks/stripe.",
        "The webhook endpoint for Stripe events is https://hooks.example.com/v2/stripe.",
    ),
    ("Tech lead for the billing rewrite is Olga Petrova.", "Tech lead for the billing rewrite is Sam Okafor."),
    # reworded frames
    ("The auth service listens on port 4000.", "The auth service now listens on port 4100."),
    ("Standup is at 9:15 every weekday.", "Since last Monday, standup is at 9:45 every weekday."),
    ("The analytics warehouse is in us-west-2.", "The analytics warehouse was moved to eu-central-1."),
    ("Our error tracking tool is Sentry.", "We changed error tracking from Sentry to Rollbar."),
    ("The frontend is deployed on Netlify.", "The frontend is no longer deployed on Netlify, it is on Vercel now."),
    (
        "The onboarding doc is maintained by Kevin Huang.",
        "The onboarding doc is now maintained by Aisha Bello, since Kevin moved to the infra team.",
    ),
    (
        "Terraform state is stored in the s3 bucket tf-state-prod.",
        "Terraform state was migrated to the s3 bucket tf-state-prod-v2 last week.",
    ),
    (
        "The retro for Team Orca is held every two weeks on Friday.",
        "Team Orca now holds its retro every week on Friday.",
    ),
    (
        "JWT access tokens expire after 1 hour.",
        "Access tokens (JWT) now expire after 20 minutes, per the security review.",
    ),
    ("The max heap for the indexer JVM is 8g.", "Max heap for the indexer JVM was raised to 12g."),
    ("the customer support budget for 2027 is 340k usd", "the 2027 customer support budget was cut to 300k usd"),
    ("The Hooli pilot ends on 2027-01-31.", "The Hooli pilot was extended and now ends on 2027-03-31."),
    ("CI uses Ubuntu 20.04 runners.", "CI runners were upgraded from Ubuntu 20.04 to Ubuntu 22.04."),
    ("The Kafka cluster has 6 brokers.", "After the scale-up, the Kafka cluster has 9 brokers."),
    (
        "Product reviews with Legal happen monthly.",
        "Product reviews with Legal are no longer monthly; they are quarterly.",
    ),
    ("The primary DNS provider is Route 53.", "The primary DNS provider was switched to Cloudflare."),
    (
        "Payroll runs on the 25th of each month.",
        "Since January, payroll runs on the last business day of each month.",
    ),
    (
        "The mobile app minimum supported iOS version is 15.",
        "Minimum supported iOS version for the mobile app is now 16.",
    ),
    ("The design system package is at version 3.2.0.", "The design system package was bumped to 4.0.1."),
    (
        "Dev environment databases are reset every Sunday night.",
        "Dev environment databases are now reset every Wednesday night.",
    ),
    (
        "The SRE team's escalation contact is Lena Fischer.",
        "Escalation contact for the SRE team changed from Lena Fischer to Raj Patel.",
    ),
    ("the offsite is planned for 14-16 may in lisbon", "the offsite moved to 4-6 june, still in lisbon"),
    ("Code freeze for release 5.4 is on Nov 20.", "Code freeze for release 5.4 was pushed to Nov 27."),
    (
        "Vendor invoices are approved by the finance lead, Maria Gomez.",
        "Vendor invoices are now approved by Henrik Olsen, the new finance lead.",
    ),
    ("Metrics are scraped every 15 seconds by Prometheus.", "Prometheus scrape interval was changed to 60 seconds."),
    (
        "The notification service is written in Ruby.",
        "The notification service was rewritten in Go and Ruby is no longer used there.",
    ),
    ("Umbrella Inc has 250 licensed seats.", "Umbrella Inc expanded to 400 licensed seats this quarter."),
    (
        "The ML training jobs run on the gpu-pool-a node pool.",
        "ML training jobs were moved to the gpu-pool-h100 node pool.",
    ),
    (
        "Password rotation for service accounts is every 180 days.",
        "Service account passwords are now rotated every 90 days.",
    ),
    (
        "The public API base URL is https://api.example.com/v1.",
        "The public API base URL changed to https://api.example.com/v2 with the new release.",
    ),
    (
        "The board meeting is scheduled for 10/09/2027 at 14:00.",
        "The board meeting was rescheduled to 10/16/2027, same time at 14:00.",
    ),
    ("Replication lag alert fires above 30 seconds.", "The replication lag alert threshold is now 10 seconds."),
    (
        "email digests are sent daily at 7am",
        "email digests are no longer daily, they go out weekly on monday at 7am",
    ),
    (
        "Our package registry mirror is Artifactory.",
        "We replaced Artifactory with Nexus as our package registry mirror.",
    ),
    (
        "The support team works in the America/New_York timezone.",
        "The support team's working timezone is now Europe/London.",
    ),
    (
        "The load balancer idle timeout is 60s.",
        "Load balancer idle timeout has been increased to 350s to fix dropped websockets.",
    ),
    ("Fiona Clarke leads the QA guild.", "The QA guild is now led by Ben Adeyemi."),
    ("The Android build uses Gradle 7.6.", "The Android build has been upgraded to Gradle 8.5."),
    (
        "Travel reimbursement cap is $2,000 per trip.",
        "The travel reimbursement cap is $2,500 per trip as of the new policy.",
    ),
    ("sso is disabled for the staging admin panel", "sso has been enabled for the staging admin panel"),
]

DISTINCT: list[tuple[str, str]] = [
    (
        "The payments-api service listens on port 8080 in staging.",
        "The payments-api service listens on port 8443 in production.",
    ),
    ("Log retention for staging is 7 days.", "Log retention for production is 90 days."),
    ("The billing service listens on port 5000.", "The reporting service listens on port 5001."),
    ("Team Falcon's sprint length is two weeks.", "Team Heron's sprint length is three weeks."),
    ("The Q3 marketing budget is $120,000.", "The Q4 marketing budget is $150,000."),
    ("Acme Corp's contract renewal date is 2027-03-15.", "Globex's contract renewal date is 2027-05-01."),
    ("primary database region is us-east-1", "disaster recovery database region is us-west-2"),
    ("Max upload size for the media bucket is 25 MB.", "Max upload size for the avatars bucket is 2 MB."),
    ("The web frontend is pinned to Node.js 20.11.0.", "The build tooling is pinned to Node.js 18.19.0."),
    ("feature flag new_checkout is enabled in staging", "feature flag new_checkout is disabled in production"),
    ("Session timeout for the admin console is 15 minutes.", "Session timeout for the customer portal is 60 minutes."),
    ("The on-call owner for the data team is Priya Shah.", "The on-call owner for the platform team is Marcus Lee."),
    (
        "API rate limit for free-tier customers is 100 requests per minute.",
        "API rate limit for enterprise customers is 5000 requests per minute.",
    ),
    (
        "The mobile team targets a crash-free rate of 99.5%.",
        "The mobile team targets a cold start time under 2 seconds.",
    ),
    ("Build server ci-runner-03 has 16 GB of RAM.", "Build server ci-runner-04 has 32 GB of RAM."),
    ("The cache TTL for product pages is 600 seconds.", "The cache TTL for search results is 60 seconds."),
    ("Deploys to production require 2 approvals.", "Deploys to staging require 1 approval."),
    ("The staging cluster runs Kubernetes 1.27.", "The staging cluster runs Istio 1.20."),
    (
        "The weekly sync with the design team is on Tuesdays at 10am.",
        "The weekly sync with the data team is on Tuesdays at 2pm.",
    ),
    (
        "Customer Initech pays €4,500 per month for the enterprise plan.",
        "Customer Initrode pays €1,200 per month for the team plan.",
    ),
    ("Dependency audits happen monthly.", "Access reviews happen quarterly."),
    (
        "The internal docs site is hosted at docs.internal.example.com.",
        "The status page is hosted at status.example.com.",
    ),
    ("the nightly backup job runs at 02:00 utc", "the nightly vacuum job runs at 04:00 utc"),
    ("Globex's account manager is Dana Whitfield.", "Globex's technical contact is Tomás Rivera."),
    ("Our Postgres connection pool size is 20 per pod.", "Our Postgres max_connections setting is 500."),
    ("The default branch of the infra repo is main.", "The default branch of the legacy-billing repo is master."),
    (
        "Config for the ingest worker lives at /etc/ingest/config.yaml.",
        "Secrets for the ingest worker live at /etc/ingest/secrets.env.",
    ),
    (
        "The legal review of the privacy policy is due March 3, 2027.",
        "The legal review of the terms of service is due April 14, 2027.",
    ),
    ("Grafana dashboards refresh every 30s.", "Grafana alert rules are evaluated every 1m."),
    (
        "The SLA for P1 incidents is a response within 1 hour.",
        "The SLA for P2 incidents is a response within 4 hours.",
    ),
    ("Tech lead for the billing rewrite is Olga Petrova.", "Product manager for the billing rewrite is Sam Okafor."),
    ("The auth service runs 3 replicas in eu-west-1.", "The auth service runs 5 replicas in us-east-1."),
    ("Python services use ruff 0.6.9 for linting.", "Python services use mypy 1.11 for type checking."),
    (
        "The Redis instance for sessions is redis-sessions-01.prod.local.",
        "The Redis instance for rate limiting is redis-ratelimit-01.prod.local.",
    ),
    (
        "the hiring plan for platform engineering is 4 engineers in 2027",
        "the hiring plan for data engineering is 3 engineers in 2027",
    ),
    ("default log level for the gateway is info", "default log level for the scheduler is warn"),
    ("Laptop refresh cycle for engineers is every 3 years.", "Phone refresh cycle for engineers is every 2 years."),
    (
        "The webhook endpoint for Stripe events is https://api.example.com/hooks/stripe.",
        "The webhook endpoint for GitHub events is https://api.example.com/hooks/github.",
    ),
    ("The Kafka cluster in production has 9 brokers.", "The Kafka cluster in staging has 3 brokers."),
    ("Standup for Team Orca is at 9:15.", "Standup for Team Lynx is at 9:30."),
    ("The analytics warehouse is in us-west-2.", "The analytics warehouse runs on Snowflake."),
    ("JWT access tokens expire after 1 hour.", "JWT refresh tokens expire after 30 days."),
    ("The max heap for the indexer JVM is 8g.", "The max heap for the query JVM is 4g."),
    ("The Hooli pilot ends on 2027-01-31.", "The Hooli pilot started on 2026-11-01."),
    ("CI uses Ubuntu 22.04 runners for Linux builds.", "CI uses macOS 14 runners for iOS builds."),
    ("Payroll runs on the 25th of each month.", "Expense reports are due on the 5th of each month."),
    ("The minimum supported iOS version is 16.", "The minimum supported Android version is 10."),
    (
        "Dev environment databases are reset every Sunday night.",
        "QA environment databases are reset every Friday night.",
    ),
    ("Metrics are retained for 15 days in Prometheus.", "Metrics are retained for 13 months in Thanos."),
    ("Umbrella Inc has 250 licensed seats.", "Umbrella Inc has 180 active users."),
    (
        "Password rotation for service accounts is every 90 days.",
        "Password rotation for human accounts is every 365 days.",
    ),
    (
        "The board meeting is scheduled for 10/09/2027 at 14:00.",
        "The budget review meeting is scheduled for 10/09/2027 at 16:00.",
    ),
    ("Replication lag warning fires above 30 seconds.", "Replication lag critical alert fires above 120 seconds."),
    ("email digests are sent daily at 7am", "sms reminders are sent daily at 9am"),
    ("The load balancer idle timeout is 60s.", "The load balancer health check interval is 10s."),
    ("Fiona Clarke leads the QA guild.", "Fiona Clarke leads the accessibility working group."),
    ("The Android build uses Gradle 8.5.", "The Android build uses Kotlin 1.9.22."),
    ("Travel reimbursement cap is $2,000 per trip.", "Meal reimbursement cap is $75 per day."),
    ("sso is enabled for the production admin panel", "sso is disabled for the staging admin panel"),
    ("The frontend is deployed on Vercel.", "The marketing site is deployed on Netlify."),
]

RESTATEMENTS: list[tuple[str, str]] = [
    ("The payments-api service listens on port 8080.", "Port 8080 is where the payments-api service listens."),
    ("Retention for application logs is 30 days.", "We keep application logs for 30 days."),
    ("the nightly backup job runs at 02:00 utc", "nightly backups kick off at 02:00 utc"),
    ("Acme Corp's contract renews on 2027-03-15.", "The renewal date for the Acme Corp contract is 2027-03-15."),
    ("Team Falcon works in two-week sprints.", "Sprints for Team Falcon last two weeks."),
    ("We pin Node.js to 20.11.0 in CI.", "CI is pinned to Node.js version 20.11.0."),
    ("Priya Shah owns the data team's on-call rotation.", "The data team's on-call rotation is owned by Priya Shah."),
    ("primary database region is us-east-1", "the primary database lives in us-east-1"),
    ("The Q3 marketing budget is $120,000.", "Marketing has $120,000 to spend in Q3."),
    ("The default branch of the infra repo is main.", "In the infra repo, main is the default branch."),
    ("feature flag new_checkout is enabled in production", "in production, the new_checkout flag is enabled"),
    ("The design sync is every Tuesday at 10am.", "Every Tuesday at 10am we have the design sync."),
    (
        "Config for the ingest worker lives at /etc/ingest/config.yaml.",
        "The ingest worker reads its config from /etc/ingest/config.yaml.",
    ),
    ("The staging cluster runs Kubernetes 1.29.", "Kubernetes 1.29 is the version running on the staging cluster."),
    (
        "Free-tier customers are rate limited to 100 requests per minute.",
        "The API rate limit for free-tier customers is 100 requests per minute.",
    ),
    ("We use GitHub Actions for CI on the mobile apps.", "CI for the mobile apps runs on GitHub Actions."),
    ("Dependency audits happen monthly.", "We audit our dependencies monthly."),
    ("Build server ci-runner-03 has 64 GB of RAM.", "ci-runner-03, one of the build servers, has 64 GB of RAM."),
    ("The release freeze starts on 5 December.", "Starting 5 December, we are in release freeze."),
    ("Globex's account manager is Dana Whitfield.", "Dana Whitfield is the account manager for Globex."),
    ("The mobile team targets a crash-free rate of 99.5%.", "A 99.5% crash-free rate is the mobile team's target."),
    ("Deploys to production require 2 approvals.", "You need 2 approvals before deploying to production."),
    (
        "Customer Initech pays €4,500 per month for the enterprise plan.",
        "Initech is on the enterprise plan at €4,500 per month.",
    ),
    ("default log level for the gateway is info", "the gateway logs at info level by default"),
    (
        "The webhook endpoint for Stripe events is https://api.example.com/hooks/stripe.",
        "Stripe sends its webhook events to https://api.example.com/hooks/stripe.",
    ),
    ("Olga Petrova is the tech lead for the billing rewrite.", "The billing rewrite is tech-led by Olga Petrova."),
    ("The analytics warehouse was moved to eu-central-1.", "The analytics warehouse now lives in eu-central-1."),
    ("JWT access tokens expire after 1 hour.", "Access tokens (JWT) are valid for 1 hour."),
    ("The Kafka cluster has 9 brokers.", "There are 9 brokers in the Kafka cluster."),
    ("sso is enabled for the staging admin panel", "the staging admin panel has sso enabled"),
]
