"""The ``Session`` record: nothing invented, required-nullable keys present, time order kept."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client._codec import from_wire, session_from_json, session_to_json, to_wire
from acp_client.exceptions import InvalidMessage
from acp_client.types import (
    ForegroundState,
    ForkSessionResponse,
    LoadSessionResponse,
    NewSessionResponse,
    Probe,
    ResumeSessionResponse,
    Session,
    SessionConfigOption,
    SessionConfigSelectOption,
    SessionInfo,
    SessionMode,
    SessionModeState,
    SessionStatusResponse,
    format_rfc3339,
    parse_rfc3339,
    parse_timestamp,
)
from acp_client.types.lifecycle import ANSWERED
from tests.codec import _schemas

REQUIRED_NULLABLE = {
    "activeTurnId": None,
    "forkedFrom": None,
    "modelId": None,
    "providerId": None,
    "workspaceRoot": None,
}
T0 = datetime(2026, 10, 26, 9, 30, tzinfo=timezone.utc)
T1 = T0 + timedelta(minutes=5)
MODES = SessionModeState("code", (SessionMode("code", "Code"), SessionMode("ask", "Ask")))
OPTIONS = (SessionConfigOption("model", "Model", "select", "fast", (SessionConfigSelectOption("fast", "Fast"),)),)


def _only(session: Session, *names: str) -> None:
    """Every field except ``session_id`` and ``names`` is None."""
    for field in attrs.fields(Session):
        if field.name != "session_id" and field.name not in names:
            assert getattr(session, field.name) is None, field.name


# --------------------------------------------------------------------------------------------
# builders: fields the agent did not supply stay None


def test_from_new_invents_nothing() -> None:
    session = Session.from_new(NewSessionResponse("sess_1"), cwd="/p")
    assert session.session_id == "sess_1" and session.cwd == "/p"
    _only(session, "cwd")
    full = Session.from_new(
        NewSessionResponse("sess_1", modes=MODES, models={"currentModelId": "m"}, config_options=OPTIONS),
        cwd="/p",
        additional_directories=["/q"],
    )
    assert (full.modes, full.models, full.config_options, full.additional_directories) == (
        MODES,
        {"currentModelId": "m"},
        OPTIONS,
        ("/q",),
    )
    _only(full, "cwd", "modes", "models", "config_options", "additional_directories")


def test_from_load_resume_fork() -> None:
    loaded = Session.from_load("sess_1", LoadSessionResponse(modes=MODES), cwd="/p")
    _only(loaded, "cwd", "modes")
    resumed = Session.from_resume("sess_1", ResumeSessionResponse(), cwd="/p")
    _only(resumed, "cwd")
    forked = Session.from_fork(ForkSessionResponse("sess_2"), cwd="/p", forked_from="sess_1")
    assert forked.session_id == "sess_2" and forked.forked_from == "sess_1"
    _only(forked, "cwd", "forked_from")


def test_from_info_parses_times_and_drops_malformed_ones(caplog: pytest.LogCaptureFixture) -> None:
    session = Session.from_info(SessionInfo("sess_1", "/p", title="Fix bug", updated_at="2026-10-26T09:35:00Z"))
    assert session.updated_at == T1 and session.title == "Fix bug"
    _only(session, "cwd", "title", "updated_at")
    with caplog.at_level(logging.WARNING, logger="acp_client.types.session"):
        bad = Session.from_info(SessionInfo("sess_1", "/p", updated_at="yesterday"))
    assert bad.updated_at is None
    assert "malformed updatedAt" in caplog.text


def test_from_status() -> None:
    state = ForegroundState("requires_action", raw={"state": "requires_action"})
    session = Session.from_status("sess_1", SessionStatusResponse.from_raw("open", state))
    assert (session.status, session.raw_status, session.state) == (Probe.ACTIVE, "open", state)
    _only(session, "status", "raw_status", "state")
    saved = Session.from_status("sess_1", SessionStatusResponse.from_raw("hibernating"))
    assert (saved.status, saved.raw_status, saved.state) == (Probe.INACTIVE, "hibernating", None)


def test_merge_lets_non_none_fields_of_the_other_win() -> None:
    base = Session.from_new(NewSessionResponse("sess_1", modes=MODES), cwd="/p")
    probe = Session.from_status("sess_1", SessionStatusResponse.from_raw("saved"))
    merged = base.merge(probe)
    assert (merged.cwd, merged.modes, merged.status, merged.raw_status) == (
        "/p",
        MODES,
        Probe.INACTIVE,
        "saved",
    )
    again = merged.merge(Session.from_status("sess_1", SessionStatusResponse.from_raw("active")))
    assert (again.status, again.raw_status, again.cwd) == (Probe.ACTIVE, "active", "/p")
    assert base.merge(Session("sess_1")) == base


def test_merge_takes_a_status_answer_whole() -> None:
    """A probe answer replaces the previous one entirely: a v2 state the new answer does not report
    (missing, null or malformed: "not reported") must not survive from an older probe."""
    running = ForegroundState("running", raw={"state": "running"})
    base = Session.from_new(NewSessionResponse("sess_1"), cwd="/p")
    probed = base.merge(Session.from_status("sess_1", SessionStatusResponse.from_raw("open", running)))
    assert (probed.status, probed.raw_status, probed.state) == (Probe.ACTIVE, "open", running)
    later = probed.merge(Session.from_status("sess_1", SessionStatusResponse.from_raw("saved")))
    assert (later.status, later.raw_status, later.state, later.cwd) == (Probe.INACTIVE, "saved", None, "/p")
    gone = probed.merge(Session("sess_1", status=Probe.UNKNOWN))  # a -32002 answer
    assert (gone.status, gone.raw_status, gone.state) == (Probe.UNKNOWN, None, None)
    assert probed.merge(Session("sess_1", cwd="/q")).state == running  # no answer: the last one stays


# --------------------------------------------------------------------------------------------
# time order


def test_updated_at_must_not_precede_created_at() -> None:
    Session("s", created_at=T0, updated_at=T0)
    Session("s", created_at=T0, updated_at=T1)
    with pytest.raises(ValueError, match="precedes"):
        Session("s", created_at=T1, updated_at=T0)
    with pytest.raises(ValueError, match="precedes"):
        Session("s", created_at="2026-10-26T10:00:00+01:00", updated_at="2026-10-26T08:59:59Z")
    Session("s", created_at="2026-10-26T10:00:00+01:00", updated_at="2026-10-26T09:00:00Z")  # equal instants


def test_decoding_drops_an_updated_at_that_precedes_created_at(caplog: pytest.LogCaptureFixture) -> None:
    data = {
        **REQUIRED_NULLABLE,
        "sessionId": "s",
        "createdAt": "2026-10-26T09:35:00Z",
        "updatedAt": "2026-10-26T09:30:00Z",
        "title": "kept",
    }
    with caplog.at_level(logging.WARNING, logger="acp_client._codec"):
        session = session_from_json(data)
    assert session.created_at == T1 and session.updated_at is None and session.title == "kept"
    assert "precedes createdAt" in caplog.text


def test_merge_keeps_the_time_order() -> None:
    early = Session("s", updated_at=T0)
    late_created = Session("s", created_at=T1)
    merged = early.merge(late_created)
    assert merged.created_at == T1 and merged.updated_at is None
    both = Session("s", created_at=T0, updated_at=T1).merge(Session("s", updated_at=T0 - timedelta(days=1)))
    assert both.updated_at == T1  # the other's inconsistent value loses to the consistent one


def test_times_accept_strings_and_naive_datetimes_stay_naive() -> None:
    assert Session("s", created_at="2026-10-26T09:30:00.123456789Z").created_at == T0.replace(microsecond=123456)
    naive = Session("s", created_at=datetime(2026, 10, 26, 9, 30)).created_at
    assert naive == datetime(2026, 10, 26, 9, 30) and naive is not None and naive.tzinfo is None  # no zone invented
    with pytest.raises(ValueError, match="RFC 3339"):
        Session("s", created_at="26/10/2026")
    assert parse_rfc3339("2026-10-26T11:30:00+02:00") == T0
    assert format_rfc3339(T0) == "2026-10-26T09:30:00Z"
    assert format_rfc3339(parse_rfc3339("2026-10-26T11:30:00+02:00")) == "2026-10-26T11:30:00+02:00"


def test_parse_timestamp_keeps_a_time_without_a_zone_naive_and_rfc3339_stays_strict() -> None:
    sent = "2026-12-01T13:06:35.841840"  # fast-agent 0.10.48's updatedAt
    value = parse_timestamp(sent)
    assert value == datetime(2026, 12, 1, 13, 6, 35, 841840) and value.tzinfo is None
    assert format_rfc3339(value) == sent  # written back as sent
    assert parse_timestamp("2026-10-26T09:30:00Z") == T0
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_rfc3339(sent)  # the strict parser still wants a zone
    for bad in ("yesterday", "2026-13-01T00:00:00", "2026-02-30T00:00:00Z", "2026-12-01"):
        with pytest.raises(ValueError):
            parse_timestamp(bad)


def test_a_naive_and_an_aware_time_are_never_ordered() -> None:
    naive = datetime(2026, 10, 26, 8, 0)
    Session("s", created_at=T1, updated_at=naive)  # cannot tell: no error
    Session("s", created_at=naive, updated_at=T0)
    merged = Session("s", created_at=T1).merge(Session("s", updated_at=naive))
    assert merged.updated_at == naive
    with pytest.raises(ValueError, match="precedes"):
        Session("s", created_at=datetime(2026, 10, 26, 9, 0), updated_at=naive)  # both naive: ordered


def test_timestamps_without_a_zone_are_kept_from_the_wire(caplog: pytest.LogCaptureFixture) -> None:
    sent = "2026-12-01T13:06:35.841840"
    with caplog.at_level(logging.WARNING):
        listed = Session.from_info(SessionInfo("sess_1", "/p", updated_at=sent))
        decoded = session_from_json({"sessionId": "s", "createdAt": "2026-12-01T13:00:00", "updatedAt": sent})
    assert listed.updated_at == datetime(2026, 12, 1, 13, 6, 35, 841840) and listed.updated_at.tzinfo is None
    assert decoded.created_at == datetime(2026, 12, 1, 13, 0)
    assert decoded.updated_at == datetime(2026, 12, 1, 13, 6, 35, 841840)
    assert "malformed" not in caplog.text
    encoded = session_to_json(decoded)
    assert encoded["updatedAt"] == sent and encoded["createdAt"] == "2026-12-01T13:00:00"
    assert session_from_json(encoded) == decoded


def test_unknown_status_strings_keep_working() -> None:
    agent = session_from_json({"sessionId": "s", "status": "hibernating", "updatedAt": "2026-12-01T13:06:35"})
    assert agent.status is Probe.INACTIVE and agent.raw_status == "hibernating"
    assert agent.updated_at == datetime(2026, 12, 1, 13, 6, 35)
    assert session_from_json(session_to_json(agent)) == agent
    answer = from_wire(SessionStatusResponse, {"status": "hibernating"})
    assert answer.status is Probe.INACTIVE and answer.raw_status == "hibernating"


# --------------------------------------------------------------------------------------------
# wire form


def test_to_json_always_writes_the_required_nullable_keys() -> None:
    assert session_to_json(Session("s")) == {"sessionId": "s", **REQUIRED_NULLABLE}
    full = Session(
        "s",
        cwd="/p",
        title="T",
        created_at=T0,
        updated_at=T1,
        status=Probe.ACTIVE,
        raw_status="open",
        state=ForegroundState("idle", "end_turn", {"state": "idle", "stopReason": "end_turn"}),
        additional_directories=("/q",),
        modes=MODES,
        models={"currentModelId": "m"},
        config_options=OPTIONS,
        forked_from="parent",
        active_turn_id="turn_3",
        model_id="m",
        provider_id="p",
        workspace_root="/p",
        turn_count=3,
        path="/var/log/s.jsonl",
        approval_mode={"mode": "ask"},
        meta={"x": 1},
    )
    encoded = session_to_json(full)
    assert encoded["forkedFrom"] == {"sessionId": "parent"}
    assert encoded["createdAt"] == "2026-10-26T09:30:00Z" and encoded["updatedAt"] == "2026-10-26T09:35:00Z"
    assert encoded["status"] == "active" and encoded["rawStatus"] == "open"
    assert encoded["configOptions"][0]["id"] == "model"
    assert session_to_json(full, protocol_version=2)["configOptions"][0]["configId"] == "model"
    json.dumps(encoded)
    assert session_from_json(encoded) == full
    assert session_from_json(session_to_json(full, protocol_version=2), protocol_version=2) == full


def test_from_wire_accepts_nulls_ignores_unknown_and_never_invents() -> None:
    session = session_from_json({"sessionId": "s", **REQUIRED_NULLABLE, "shiny": {"new": True}})
    assert session == Session("s")
    malformed = session_from_json(
        {
            "sessionId": "s",
            "cwd": 3,
            "turnCount": True,
            "createdAt": "not a time",
            "state": "idle",
            "modes": {"availableModes": []},
            "configOptions": [
                {"id": "x"},
                {"id": "model", "name": "Model", "type": "boolean", "currentValue": True},
            ],
            "additionalDirectories": ["/a", 5],
            "forkedFrom": 7,
            "_meta": [],
        }
    )
    assert malformed == Session(
        "s",
        config_options=(SessionConfigOption("model", "Model", "boolean", True),),
        additional_directories=("/a",),
    )
    for bad in (None, [], {"sessionId": 1}, {"cwd": "/p"}):
        with pytest.raises(InvalidMessage):
            session_from_json(bad)


def test_seed_shaped_session_decodes() -> None:
    """A Session as the seed schema describes it (idle: activeTurnId null, root: forkedFrom null)."""
    seed = (_schemas.DATA / "seeds" / "session_object_schema.txt").read_text()
    schema = json.loads(seed[seed.index("{") :])
    wire = {
        "sessionId": "019a2b3c-0000-7000-8000-000000000001",
        "activeTurnId": None,
        "createdAt": "2026-10-26T09:30:00Z",
        "updatedAt": "2026-10-26T09:35:00Z",
        "forkedFrom": None,
        "modelId": None,
        "path": "",
        "providerId": "anthropic",
        "status": "notLoaded",
        "turnCount": 0,
        "workspaceRoot": None,
        "approvalMode": {"mode": "ask"},
    }
    assert set(schema["required"]) <= set(wire)
    session = session_from_json(wire)
    assert (session.active_turn_id, session.forked_from, session.model_id, session.workspace_root) == (None,) * 4
    assert (session.provider_id, session.path, session.turn_count) == ("anthropic", "", 0)
    assert (session.status, session.raw_status) == (Probe.INACTIVE, "notLoaded")
    assert (session.created_at, session.updated_at) == (T0, T1)
    encoded = session_to_json(session)
    for key in schema["required"]:
        assert key in encoded, key
    assert session_from_json(encoded) == session


def test_unknown_status_survives_a_round_trip() -> None:
    session = Session("s", status=Probe.UNKNOWN)
    assert session_from_json(session_to_json(session)) == session


def test_an_agents_status_string_unknown_is_an_unrecognized_value() -> None:
    # UNKNOWN means "-32002: the agent does not know the session", never a wire value. In an
    # agent's Session (no rawStatus: not our own to_json form) "unknown" is just a status string
    # this SDK does not recognize: kept verbatim, read as inactive.
    session = session_from_json({"sessionId": "s", **REQUIRED_NULLABLE, "status": "unknown"})
    assert (session.status, session.raw_status) == (Probe.INACTIVE, "unknown")


# --------------------------------------------------------------------------------------------
# properties


_TIMES = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc))
_TEXT = st.text(max_size=8)


@st.composite
def sessions(draw: Any) -> Session:
    created = draw(st.none() | _TIMES)
    updated = draw(st.none() | _TIMES)
    if created is not None and updated is not None and updated < created:
        created, updated = updated, created
    return Session(
        session_id=draw(_TEXT),
        cwd=draw(st.none() | _TEXT),
        title=draw(st.none() | _TEXT),
        created_at=created,
        updated_at=updated,
        status=draw(st.none() | st.sampled_from(sorted(ANSWERED))),
        raw_status=draw(st.none() | _TEXT),
        state=draw(st.none() | _TEXT.map(lambda s: ForegroundState(s, raw={"state": s}))),
        additional_directories=draw(st.none() | st.lists(_TEXT, max_size=2).map(tuple)),
        modes=draw(st.none() | st.just(MODES)),
        config_options=draw(st.none() | st.just(OPTIONS)),
        forked_from=draw(st.none() | _TEXT),
        active_turn_id=draw(st.none() | _TEXT),
        model_id=draw(st.none() | _TEXT),
        provider_id=draw(st.none() | _TEXT),
        workspace_root=draw(st.none() | _TEXT),
        turn_count=draw(st.none() | st.integers(0, 10**6)),
        path=draw(st.none() | _TEXT),
    )


@settings(max_examples=60, deadline=None)
@given(sessions(), sessions())
def test_session_round_trip_and_merge_properties(a: Session, b: Session) -> None:
    encoded = session_to_json(a)
    assert set(REQUIRED_NULLABLE) <= set(encoded)
    assert session_from_json(json.loads(json.dumps(encoded))) == a
    merged = a.merge(b)
    for field in attrs.fields(Session):
        mine, theirs, result = getattr(a, field.name), getattr(b, field.name), getattr(merged, field.name)
        if field.name in ("raw_status", "state") and b.status is not None:
            assert result == theirs  # a status answer is taken whole
        elif field.name != "updated_at":
            assert result == (theirs if theirs is not None else mine)
    if merged.created_at is not None and merged.updated_at is not None:
        assert merged.updated_at >= merged.created_at


def test_the_converter_encodes_and_decodes_sessions_like_to_json() -> None:
    session = Session("s", created_at=T0, status=Probe.ACTIVE, raw_status="open", config_options=OPTIONS)
    for version in (1, 2):
        assert to_wire(session, protocol_version=version) == session_to_json(session, protocol_version=version)
        assert (
            from_wire(Session, session_to_json(session, protocol_version=version), protocol_version=version) == session
        )
    assert to_wire([session]) == [session_to_json(session)]
    with pytest.raises(InvalidMessage, match="sessionId"):
        from_wire(Session, {"cwd": "/p"})
