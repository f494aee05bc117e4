"""Use cases build the generated messages in the service's words (slowave.service.messages)."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest

from slowave.api.servicer import MemoryServicer
from slowave.service.messages import enum_number, enum_word, enum_words, message
from slowave.v1 import errors_pb2, resources_pb2
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res

ENUMS = [enum for module in (resources_pb2, pb, errors_pb2) for enum in module.DESCRIPTOR.enum_types_by_name.values()]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.name)
def test_every_enum_value_has_a_word_that_names_it_back(enum):
    for value in enum.values:
        word = enum_word(enum, value.number)
        assert word == word.lower() and value.name.endswith(word.upper())
        assert enum_number(enum, word) == value.number
    assert enum_words(enum) == tuple(enum_word(enum, v.number) for v in enum.values if v.number)


def test_an_undefined_number_has_no_word():
    assert enum_word(res.Outcome.DESCRIPTOR, 99) is None


def test_message_takes_words_datetimes_dicts_and_none_as_unset():
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    procedure = message(
        res.Procedure,
        procedure_id="proc_1",
        context={"env": "staging", "retries": 3},
        outcome="failure",
        verification_status="partially_verified",
        created_at=when,
        contributions=[message(res.ProcedureContribution, effect="no_effect", outcome=None)],
    )
    assert procedure.outcome == res.OUTCOME_FAILURE
    assert procedure.verification_status == res.VERIFICATION_STATUS_PARTIALLY_VERIFIED
    assert procedure.created_at.ToDatetime(tzinfo=UTC) == when
    assert dict(procedure.context) == {"env": "staging", "retries": 3}
    assert procedure.contributions[0].effect == res.EFFECT_NO_EFFECT
    assert not procedure.contributions[0].HasField("outcome")


def test_a_name_that_is_no_field_is_refused_not_dropped():
    with pytest.raises(ValueError, match=r"slowave.v1.CommitResponse has no field 'trajectory_skipped'"):
        message(pb.CommitResponse, session_id="sess_1", trajectory_skipped=1)


def test_a_word_that_is_no_value_is_refused_at_its_field():
    with pytest.raises(ValueError, match=r"slowave.v1.Memory.type: slowave.v1.MemoryType has no value 'rumour'"):
        message(res.Memory, memory_id="sch_1", type="rumour")


class _Aborted(Exception):
    pass


class _Context:
    """The part of grpc.ServicerContext the servicer's error handling reads."""

    def __init__(self) -> None:
        self.status: grpc.Status | None = None

    def is_active(self) -> bool:
        return True

    def time_remaining(self) -> None:
        return None

    def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        raise _Aborted


def test_a_response_with_a_name_that_is_no_field_fails_the_call_as_internal(caplog):
    servicer = MemoryServicer(ctx=None, metrics=None)  # type: ignore[arg-type]
    context = _Context()
    with pytest.raises(_Aborted):
        servicer._run(context, lambda: message(pb.CommitResponse, session_id="sess_1", trajectory_skipped=1))
    assert context.status is not None and context.status.code == grpc.StatusCode.INTERNAL
    assert "has no field 'trajectory_skipped'" in caplog.text
