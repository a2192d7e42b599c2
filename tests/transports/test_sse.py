"""Pure tests of the incremental SSE parser (no event loop, no sockets)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client.exceptions import MessageTooLarge
from acp_client.transports._sse import SseEvent, SseItem, SseParser

BIG = 1 << 20


def parse(*chunks: bytes, line: int = BIG, event: int = BIG) -> list[SseItem]:
    parser = SseParser(max_line_bytes=line, max_event_bytes=event)
    out: list[SseItem] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


def events(*chunks: bytes) -> list[SseEvent]:
    out = parse(*chunks)
    assert all(isinstance(item, SseEvent) for item in out)
    return out  # type: ignore[return-value]


def test_single_event() -> None:
    assert events(b'data: {"a":1}\n\n') == [SseEvent(b'{"a":1}')]


def test_multi_line_data_is_joined_with_lf() -> None:
    assert events(b"data: one\ndata: two\ndata:three\n\n") == [SseEvent(b"one\ntwo\nthree")]


def test_comments_and_keepalives_are_skipped() -> None:
    assert events(b": keepalive\n\n:\n: x\ndata: a\n: inside\n\n") == [SseEvent(b"a")]


def test_event_type_and_id() -> None:
    out = events(b"event: ping\nid: 7\ndata: x\n\ndata: y\n\n")
    assert out == [SseEvent(b"x", "ping", "7"), SseEvent(b"y", "message", "7")]  # the id persists


def test_id_with_nul_is_ignored_and_empty_id_resets() -> None:
    parser = SseParser(max_line_bytes=BIG, max_event_bytes=BIG)
    assert parser.feed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nid\ndata: c\n\n") == [
        SseEvent(b"a", id="1"),
        SseEvent(b"b", id="1"),
        SseEvent(b"c", id=""),
    ]
    assert parser.last_event_id == ""


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_line_endings(eol: bytes) -> None:
    stream = b"data: a" + eol + b"data: b" + eol + eol + b":c" + eol + b"data: d" + eol + eol
    assert events(stream) == [SseEvent(b"a\nb"), SseEvent(b"d")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert events(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SseEvent(b"a\nb")]


def test_cr_alone_at_chunk_end_then_text() -> None:
    assert events(b"data: a\r", b"data: b\r\r") == [SseEvent(b"a\nb")]


def test_bom_is_skipped_only_at_the_start() -> None:
    assert events(b"\xef\xbb\xbfdata: a\n\n") == [SseEvent(b"a")]
    assert events(b"\xef", b"\xbb", b"\xbfdata: a\n\n") == [SseEvent(b"a")]
    # A BOM later in the stream is data; one at the start of a line breaks the field name.
    assert events(b"data: \xef\xbb\xbfx\n\n") == [SseEvent(b"\xef\xbb\xbfx")]
    assert events(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == [SseEvent(b"a")]


def test_a_field_name_alone_split_across_chunks() -> None:
    # "data" with no colon is a data line with an empty value, however the line arrives.
    assert events(b"da", b"ta\n\n") == [SseEvent(b"")]
    assert events(b"data: a\nda", b"ta\n\n") == [SseEvent(b"a\n")]


def test_field_parsing_details() -> None:
    assert events(b"data\n\n") == [SseEvent(b"")]  # a field name alone: empty value
    assert events(b"data:  two spaces\n\n") == [SseEvent(b" two spaces")]  # only one space is stripped
    assert events(b"data:\n\n") == [SseEvent(b"")]
    assert events(b"unknown: x\ndata: a\n\n") == [SseEvent(b"a")]


def test_event_without_data_is_not_dispatched() -> None:
    assert events(b"event: x\nid: 3\n\n\n\n") == []


def test_event_type_does_not_leak_into_next_event() -> None:
    assert events(b"event: a\ndata: 1\n\ndata: 2\n\n") == [SseEvent(b"1", "a"), SseEvent(b"2")]


def test_byte_by_byte() -> None:
    stream = b'\xef\xbb\xbf: hi\r\nevent: e\r\ndata: {"x": [1, 2]}\r\ndata: z\r\n\r\ndata: last\n\n'
    assert events(*(stream[i : i + 1] for i in range(len(stream)))) == events(stream)
    assert events(stream) == [SseEvent(b'{"x": [1, 2]}\nz', "e"), SseEvent(b"last")]


def test_whole_events_in_one_chunk_parse_as_line_by_line() -> None:
    # A chunk that ends events is split at blank lines (one check per one-line event); every
    # other event in it takes the line-by-line path: the result is the same as byte by byte.
    stream = (
        b"data: a\n\ndata:b\n\n\n\nid: 7\ndata: c\n\nevent: e\ndata: d\n\n: note\n\n"
        + b"data: "
        + b"x" * 60
        + b"\n\ndata: ok\n\ndata: one\ndata: two\n\ndata: \n\ndata\n\nretry: 5\n\ndata: cut"
    )
    for crlf in (False, True):
        data = stream.replace(b"\n", b"\r\n") if crlf else stream
        whole = [item if isinstance(item, SseEvent) else "too large" for item in parse(data, line=50)]
        one_by_one = parse(*(data[i : i + 1] for i in range(len(data))), line=50)
        assert [item if isinstance(item, SseEvent) else "too large" for item in one_by_one] == whole
        assert whole == [
            SseEvent(b"a"),
            SseEvent(b"b"),
            SseEvent(b"c", id="7"),
            SseEvent(b"d", "e", "7"),
            "too large",
            SseEvent(b"ok", id="7"),
            SseEvent(b"one\ntwo", id="7"),
            SseEvent(b"", id="7"),
            SseEvent(b"", id="7"),
        ]


def test_message_data_mode_yields_the_data_of_message_events() -> None:
    parser = SseParser(max_line_bytes=50, max_event_bytes=BIG, message_data=True)
    stream = b"data: a\n\nevent: other\ndata: b\n\ndata: " + b"x" * 60 + b"\n\ndata: c\ndata: d\n\n"
    out = parser.feed(stream)
    assert out[:2] == [b"a", SseEvent(b"b", "other")]
    assert isinstance(out[2], MessageTooLarge)
    assert out[3:] == [b"c\nd"]
    assert all(type(item) is bytes for item in out if not isinstance(item, SseEvent | MessageTooLarge))


def test_text_property_decodes_leniently() -> None:
    assert SseEvent(b"caf\xc3\xa9 \xff").text == "café \ufffd"


def test_oversized_line_is_reported_and_the_stream_resynchronizes() -> None:
    out = parse(b"data: " + b"x" * 100 + b"\ndata: more\n\ndata: ok\n\n", line=50)
    assert len(out) == 2
    assert isinstance(out[0], MessageTooLarge) and out[0].limit == 50
    assert out[1] == SseEvent(b"ok")


def test_oversized_partial_line_is_not_buffered() -> None:
    parser = SseParser(max_line_bytes=50, max_event_bytes=BIG)
    out = parser.feed(b"data: " + b"x" * 60)  # no terminator yet
    assert len(out) == 1 and isinstance(out[0], MessageTooLarge)
    for _ in range(100):  # the rest of the line is dropped as it comes, not stored
        assert parser.feed(b"y" * 1000) == []
    assert len(parser._partial) == 0
    assert parser.feed(b"\ndata: still the same event\n\ndata: ok\n\n") == [SseEvent(b"ok")]


def test_oversized_event_is_reported_once() -> None:
    lines = b"".join(b"data: " + b"x" * 10 + b"\n" for _ in range(20))
    out = parse(lines + b"\n" + b"data: ok\n\n", event=100)
    assert len(out) == 2
    assert isinstance(out[0], MessageTooLarge) and out[0].limit == 100
    assert out[1] == SseEvent(b"ok")


def test_event_exactly_at_the_caps_is_accepted() -> None:
    payload = b"x" * 44
    assert parse(b"data: " + payload + b"\n\n", line=50, event=44) == [SseEvent(payload)]
    # Two data lines count their joining newline.
    out = parse(b"data: " + b"x" * 22 + b"\ndata: " + b"x" * 21 + b"\n\n", event=44)
    assert out == [SseEvent(b"x" * 22 + b"\n" + b"x" * 21)]
    out = parse(b"data: " + b"x" * 22 + b"\ndata: " + b"x" * 22 + b"\n\n", event=44)
    assert len(out) == 1 and isinstance(out[0], MessageTooLarge)


def test_finish_reports_a_truncated_event() -> None:
    parser = SseParser(max_line_bytes=BIG, max_event_bytes=BIG)
    assert parser.feed(b"data: complete\n\ndata: cut") == [SseEvent(b"complete")]
    assert parser.finish() is True

    parser.feed(b"data: a\n")  # a data line but no blank line
    assert parser.finish() is True

    parser.feed(b"data: a\n\n: partial comm")
    assert parser.finish() is False

    assert parser.finish() is False


def test_parser_is_reusable_after_finish() -> None:
    parser = SseParser(max_line_bytes=BIG, max_event_bytes=BIG)
    parser.feed(b"data: cut")
    parser.finish()
    assert parser.feed(b"\xef\xbb\xbfdata: fresh\n\n") == [SseEvent(b"fresh")]


def test_caps_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SseParser(max_line_bytes=0, max_event_bytes=1)


# --------------------------------------------------------------------------------------------
# Property: any chunking of a valid stream yields the same events.

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30)
_name = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=8)
_event = st.tuples(
    st.lists(_text, min_size=1, max_size=4),  # data lines
    st.one_of(st.none(), _name),  # event type
    st.one_of(st.none(), _name),  # id
    st.lists(_text, max_size=2),  # comments
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[SseEvent]]:
    specs = draw(st.lists(_event, max_size=6))
    bom = draw(st.booleans())
    previous = [b""]

    def eol() -> bytes:
        # Any terminator, except an LF right after a lone CR (that pair is one CRLF terminator).
        choice = draw(st.sampled_from([b"\r", b"\r\n"] if previous[0] == b"\r" else [b"\n", b"\r", b"\r\n"]))
        previous[0] = choice
        return choice

    out = bytearray(b"\xef\xbb\xbf" if bom else b"")
    expected: list[SseEvent] = []
    last_id = ""
    for data_lines, event_type, event_id, comments in specs:
        for comment in comments:
            out += b":" + comment.encode() + eol()
        if event_type is not None:
            out += b"event: " + event_type.encode() + eol()
        if event_id is not None:
            out += b"id:" + event_id.encode() + eol()
            last_id = event_id
        for line in data_lines:
            out += b"data: " + line.encode() + eol()
        out += eol()
        expected.append(SseEvent("\n".join(data_lines).encode(), event_type or "message", last_id))
    return bytes(out), expected


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_any_chunking_yields_the_same_events(stream: tuple[bytes, list[SseEvent]], cuts: list[int]) -> None:
    data, expected = stream
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    parser = SseParser(max_line_bytes=BIG, max_event_bytes=BIG)
    got: list[SseItem] = []
    for chunk in chunks:
        got.extend(parser.feed(chunk))
    assert got == expected
    assert parser.finish() is False
    assert parse(data) == expected


@settings(max_examples=100, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_message_data_mode_under_any_chunking(stream: tuple[bytes, list[SseEvent]], cuts: list[int]) -> None:
    data, expected = stream
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    parser = SseParser(max_line_bytes=BIG, max_event_bytes=BIG, message_data=True)
    got: list[SseItem] = []
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        got.extend(parser.feed(data[a:b]))
    assert got == [event.data if event.event == "message" else event for event in expected]


# --------------------------------------------------------------------------------------------
# Hostile worst cases: memory stays under twice the cap, absurd fields are ignored.


def _peak_while(feed: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        feed()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _chunks(data: bytes, size: int = 64 * 1024) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_an_incomplete_data_line_counts_against_the_event_cap() -> None:
    cap = 1 << 20
    first = b"data: " + b"a" * (cap - 16) + b"\n"
    second = b"data: " + b"b" * cap + b"\n\n"
    chunks = _chunks(first) + _chunks(second) + [b'data: {"ok":1}\n\n']
    parser = SseParser(max_line_bytes=16 * cap, max_event_bytes=cap)
    out: list[SseItem] = []

    def run() -> None:
        for chunk in chunks:
            out.extend(parser.feed(chunk))

    peak = _peak_while(run)
    assert peak < 2 * cap, f"peak {peak / cap:.2f}x the cap"
    assert len(out) == 2 and isinstance(out[0], MessageTooLarge) and out[0].limit == cap
    assert out[1] == SseEvent(b'{"ok":1}')


def test_lines_beside_the_data_cannot_double_the_memory() -> None:
    cap = 1 << 20
    data = b"data: " + b"a" * (cap - 16) + b"\n"
    # A legitimate event near the cap costs its data twice while it is dispatched (joined into one
    # bytes value), so the comment case carries half the cap: the comment itself must cost nothing.
    for junk in (b"id: " + b"i" * cap, b"event: " + b"e" * cap, b": " + b"c" * (4 * cap)):
        if junk.startswith(b":"):
            data = b"data: " + b"a" * (cap // 2) + b"\n"
        parser = SseParser(max_line_bytes=16 * cap, max_event_bytes=cap)
        chunks = _chunks(data) + _chunks(junk + b"\n\n") + [b"data: next\n\n"]
        out: list[SseItem] = []

        def run(parser: SseParser = parser, chunks: list[bytes] = chunks, out: list[SseItem] = out) -> None:
            for chunk in chunks:
                out.extend(parser.feed(chunk))

        peak = _peak_while(run)
        assert peak < 2 * cap, f"{junk[:8]!r}: peak {peak / cap:.2f}x the cap"
        assert out[-1] == SseEvent(b"next")


def test_comments_are_never_buffered() -> None:
    parser = SseParser(max_line_bytes=100, max_event_bytes=100)
    assert parser.feed(b": " + b"k" * 50) == []
    for _ in range(50):
        assert parser.feed(b"k" * 1000) == []  # far past the line cap: a comment is not held, nor reported
    assert len(parser._partial) == 0
    assert parser.feed(b"\ndata: a\n\n") == [SseEvent(b"a")]


def test_a_huge_retry_value_is_ignored() -> None:
    parser = SseParser(max_line_bytes=BIG, max_event_bytes=BIG)
    assert parser.feed(b"retry: 2000\n\n") == []
    # int() refuses more than 4300 digits: this raised ValueError out of feed().
    assert parser.feed(b"retry: " + b"9" * 5000 + b"\ndata: a\n\n") == [SseEvent(b"a")]
    assert parser.feed(b"retry: 99999999999\n\n") == []
