"""Retrieval as agents ask, over real gRPC: word forms, questions, session context, time.

A scope of ordinary project memories, asked ordinary questions. Each rule of the retrieval model
that an agent relies on has a test here; the benchmarks (bench/locomo.py, bench/quality.py)
measure how well the rules work together.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.protobuf import timestamp_pb2

from tests.support import activate, assess_all, commit, pb, res


@pytest.fixture
def server(hybrid_server):
    """This module runs against the defaults' semantic channel (`make serve`)."""
    return hybrid_server


PROJECT = [
    "The payments service pins every dependency to an exact version.",
    "The worker fleet runs Python 3.11 on Debian bookworm.",
    "Never commit credentials to the repository; secrets live in Vault.",
    "Deploys to production happen on Tuesday and Thursday mornings only.",
    "The search API listens on port 9200 behind the internal load balancer.",
    "Ana Lima owns the billing reconciliation job.",
    "Staging databases are refreshed from anonymised production snapshots every Sunday.",
    "Feature flags are managed in LaunchDarkly, not in environment variables.",
    "The mobile app supports iOS 16 and later.",
    "Log retention is 30 days in Loki and one year in cold storage.",
    "The frontend is built with React 18 and Vite.",
    "Incidents are declared in the #incidents Slack channel by the on-call engineer.",
    "Kafka topics use six partitions unless a team asks for more.",
    "The CI pipeline must finish within 15 minutes or the merge queue rejects the change.",
    "Customer data must stay in the EU region.",
    "Database migrations run before the new application version starts.",
    "The API gateway rate-limits each tenant to 100 requests per second.",
    "Backups are encrypted with a key held in the cloud KMS.",
    "The design system's colours come from the tokens package.",
    "Error budgets are reviewed in the reliability meeting every month.",
]


def _store(stub, scope: str, contents: list[str], occurred: list[datetime | None] | None = None) -> list[str]:
    """Stores the claims, in order, in one session (one batch), then closes it."""
    a = activate(stub, scope, task="seeding project memories", initial_goal="seed")
    items = []
    for i, content in enumerate(contents):
        item = pb.RememberItem(content=content, type=res.MEMORY_TYPE_FACT)
        if occurred and occurred[i] is not None:
            ts = timestamp_pb2.Timestamp()
            ts.FromDatetime(occurred[i])
            item.occurred_at.CopyFrom(ts)
        items.append(item)
    r = stub.Remember(pb.RememberRequest(session_id=a.session_id, scope=scope, memories=items), timeout=30)
    assess_all(stub, a)
    commit(stub, a.session_id)
    return [x.data.memory_id for x in r.batch.results]


def _ask(stub, scope: str, question: str) -> list[str]:
    return [m.content for m in activate(stub, scope, task=question).memories]


def test_other_word_forms_match(stub, scope):
    _store(stub, scope, PROJECT)
    found = _ask(stub, scope, "what version pinning policy do we have for dependencies")
    assert found and found[0] == PROJECT[0]


def test_irregular_forms_match_their_base(stub, scope):
    """A stemmer strips suffixes and knows no irregular forms: `builds` and `built`, `buy` and
    `bought`, `go` and `went` are one term only through domain.terms.IRREGULAR_FORMS."""
    extra = [
        "The release dashboard was rebuilt by the platform team.",
        "We bought a second hardware security module for the payments cluster.",
        "Ana went to the vendor review and told procurement to renew the Loki contract.",
    ]
    _store(stub, scope, PROJECT + extra)
    assert _ask(stub, scope, "Who rebuilds the release dashboard?")[:1] == [extra[0]]
    assert _ask(stub, scope, "What did we buy for payments?")[:1] == [extra[1]]
    assert _ask(stub, scope, "Who goes to vendor reviews and tells procurement?")[:1] == [extra[2]]
    assert _ask(stub, scope, "Which tool builds the frontend?")[:1] == [PROJECT[10]]  # "is built with React"


def test_a_questions_specific_words_admit_its_memory(stub, scope):
    _store(stub, scope, PROJECT)
    for question, memory in [
        ("Which Python version do the workers use?", PROJECT[1]),
        ("When are we allowed to deploy to production?", PROJECT[3]),
        ("Who owns billing reconciliation?", PROJECT[5]),
        ("How long do we retain logs?", PROJECT[9]),
        ("How many partitions does a Kafka topic get?", PROJECT[12]),
    ]:
        found = _ask(stub, scope, question)
        assert found, f"empty page for {question!r}"
        assert found[0] == memory, (question, found)


def test_a_question_of_function_words_only_admits_nothing_but_the_floor(stub, scope):
    _store(stub, scope, PROJECT)
    assert _ask(stub, scope, "What is it that they would have done?") == []


def test_a_name_most_memories_hold_does_not_outrank_the_cues_specific_words(stub, scope):
    # A conversation with Sam: Sam's name is in most memories. "Sam" in the question still counts
    # (relevance.NAME_FLOOR), but a memory holding only the name ("Good luck with the move, Sam.")
    # must not outrank the one holding the question's specific word ("adopt"). With the name
    # weighing the cue's whole average term, four of them did.
    answer = "I finally adopted Biscuit from the animal shelter."
    only_the_name = [
        "Thanks, that sounds like a great weekend, Sam.",
        "How did the interview go, Sam?",
        "Good luck with the move, Sam.",
        "The photos from the lake are beautiful, Sam.",
        "I tried that recipe and loved it, Sam.",
        "See you on Friday, Sam.",
    ]
    chat = [*only_the_name[:2], "You have such a kind heart, Sam.", *only_the_name[2:4]]
    chat += ["What kind of car do you drive these days?", *only_the_name[4:], "It was that kind of day.", answer]
    _store(stub, scope, chat)
    found = _ask(stub, scope, "What kind of dog did Sam adopt?")
    assert answer in found and "You have such a kind heart, Sam." in found  # the name still counts
    assert all(found.index(answer) < found.index(m) for m in only_the_name if m in found), found


def test_session_context_finds_a_memory_by_the_claims_stored_before_it(stub, scope):
    # The later claim says "It" for the canary rollout that the claim before it names. A memory of
    # another session with the same terms, stored earlier (so it would win a tie), ranks below it.
    _store(stub, scope, ["The checkout smoke test failed twice."])
    _store(
        stub,
        scope,
        ["We started the canary rollout of the ledger service on Monday.", "It failed the checkout smoke test twice."],
    )
    found = _ask(stub, scope, "Which smoke test did the ledger canary rollout fail?")
    assert found.index("It failed the checkout smoke test twice.") < found.index(
        "The checkout smoke test failed twice."
    )


def test_session_context_never_admits_a_memory_alone(stub, scope):
    _store(stub, scope, ["The ledger canary rollout began on Monday.", "Lunch was pizza."])
    found = _ask(stub, scope, "When did the ledger canary rollout begin?")
    assert found == ["The ledger canary rollout began on Monday."]


def test_memories_carry_created_at_and_occurred_at(stub, scope):
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    before = datetime.now(UTC)
    _store(
        stub,
        scope,
        ["The quarterly planning happened in the Lisbon office.", "The Lisbon office has a rooftop."],
        [when, None],
    )
    memories = {m.content: m for m in activate(stub, scope, task="What about the Lisbon office?").memories}
    dated, undated = (
        memories["The quarterly planning happened in the Lisbon office."],
        memories["The Lisbon office has a rooftop."],
    )
    assert dated.occurred_at.ToDatetime(tzinfo=UTC) == when
    assert not undated.HasField("occurred_at")
    for m in (dated, undated):
        created = m.created_at.ToDatetime(tzinfo=UTC)
        assert before.replace(microsecond=0) <= created.replace(microsecond=0) <= datetime.now(UTC)


def test_the_occurred_dates_words_are_searchable(stub, scope):
    _store(
        stub,
        scope,
        ["The team offsite took place in Porto.", "Porto has good coffee."],
        [datetime(2024, 6, 12, tzinfo=UTC), None],
    )
    assert _ask(stub, scope, "What happened in June 2024?") == ["The team offsite took place in Porto."]


def test_a_cue_naming_a_date_prefers_memories_that_occurred_then(stub, scope):
    may, june = datetime(2023, 5, 20, tzinfo=UTC), datetime(2023, 6, 20, tzinfo=UTC)
    contents = ["Caroline went to the support group meeting.", "Caroline went to the support group meeting again."]
    _store(stub, scope, contents, [june, may])
    for cue, first in [
        ("When did Caroline go to the support group in May 2023?", contents[1]),
        ("When did Caroline go to the support group in June?", contents[0]),
        ("Did Caroline go to the support group on 20 June 2023?", contents[0]),
    ]:
        assert _ask(stub, scope, cue)[0] == first, cue


def test_a_cue_naming_a_date_prefers_memories_that_tell_of_it(stub, scope):
    """The word "yesterday" in a memory that occurred on 17 March is 16 March; "last month" in one
    of 3 April is March (domain.dates.told_of): a cue naming that day or month prefers them over
    equally matching memories of other days of the same month. Each twin is stored in a session of its own
    (no session context between them), the plain one first: it wins ties and, being shorter,
    matches a little better without the rule."""
    plain = ["James: I went bowling with my brother.", "John: My colleagues and I went to a convention."]
    told = [
        "James: Yesterday I went bowling with my brother.",
        "John: My colleagues and I went to a convention last month.",
    ]
    _store(stub, scope, plain, [datetime(2022, 3, 20, tzinfo=UTC), datetime(2023, 4, 20, tzinfo=UTC)])
    _store(stub, scope, told[:1], [datetime(2022, 3, 17, tzinfo=UTC)])
    _store(stub, scope, told[1:], [datetime(2023, 4, 3, tzinfo=UTC)])
    assert _ask(stub, scope, "What did James do with his brother on March 16, 2022?")[0] == told[0]
    assert _ask(stub, scope, "What did John attend with his colleagues in March 2023?")[0] == told[1]
    # Without a date in the cue the rule does nothing.
    assert _ask(stub, scope, "What did James do with his brother?")[0] == plain[0]
    assert _ask(stub, scope, "What did John attend with his colleagues?")[0] == plain[1]
