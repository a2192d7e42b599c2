"""Deliberate defects the reference agent can be given, to show what a conformance check catches.

Every fault is off by default: ``ReferenceAgent()`` is the correct agent. Each one reproduces a
deviation measured in a real agent (or one the ``session/status`` proposal forbids), so that
``acp-reconnect check`` can be shown to fail on it (``tests/check/test_faults.py`` pins which check
fails for which fault). From a shell: ``python -m acp_client.testing.reference_agent --stdio
--fault load-unknown-ok --fault ignore-cancel``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ...exceptions import ConfigurationError

#: Every fault, with what it makes the agent do.
FAULTS: Final[dict[str, str]] = {
    "load-unknown-ok": "session/load (v1) or session/resume with replayFrom (v2) of an unknown id answers {} "
    "and replays nothing",
    "resume-unknown-ok": "a plain session/resume of an unknown id answers {}",
    "replay-without-ids": "replayed messages carry no messageId",
    "replay-new-ids": "replayed messages carry fresh messageIds, not the ones sent live",
    "replay-twice": "a replay sends the whole history twice",
    "replay-drops-last": "a replay leaves out the last message",
    "replay-on-resume": "a plain session/resume replays the whole history",
    "ignore-cancel": "session/cancel is ignored: the turn runs on",
    "answer-notifications": "every notification is answered with an error (id null)",
    "reuse-session-id": "session/new answers the id the previous session/new gave",
    "resume-not-found": "session/resume is advertised but answers -32601",
    "no-capabilities": "initialize advertises no session capability (no loadSession either); the methods still work",
    "naive-timestamps": "createdAt / updatedAt are sent without a zone",
    "sparse-session-objects": "session/list entries leave out the required-nullable members that are null",
    "status-attaches": "session/status attaches the session to the probing connection and replays its history there",
    "status-active-after-restart": "session/status answers active for a stored session that is not in memory",
    "status-always-active": "session/status answers active for every id, known or not (a liar among instances)",
    "status-unknown-no-data": "session/status of an unknown id answers -32002 without data.sessionId",
    "slow-status": "session/status answers after 80 ms",
    "hang-status": "session/status is never answered",
    "unknown-method-internal": "a method the agent does not route answers -32603 'Unknown method: <name>', not -32601",
    "not-found-internal": "an unknown session answers -32603 'Internal error' with data.details 'Session not found'",
    "live-without-ids": "live agent message chunks carry no messageId (the replay still carries them)",
    "pre-prompt-chunk": "a greeting agent_message_chunk follows the session/new answer, before any prompt",
    "cancel-owes-next-turn": "the turn after a cancelled one ends at once with no answer; its answer streams at "
    "the start of the turn after it",
    "escapes": "every text the agent controls carries ESCAPES (terminal escapes, C1 and bidi controls, a newline): "
    "message and thought chunks, tool call titles, plan entries, session titles, mode names, permission titles "
    "and option names, error messages, and its stderr (--stdio)",
    "escape-ids": "session ids carry ESCAPES too (WebSocket and stdio only: HTTP headers cannot hold them)",
}

#: What the ``escapes`` fault puts into every agent-controlled string: each control sequence a
#: hostile agent has been seen to use on a terminal or an editor, and a newline (one-line UI places
#: such as banners, status lines and select items must not break on it).
ESCAPES: Final = (
    "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write the clipboard ("pwned")
    "\x1b]0;pwned-title\x07"  # OSC 0: retitle the window / tmux pane
    "\x1b]2;pwned-title\x1b\\"  # OSC 2, ended by ST
    "\x1b]8;;file:///etc/passwd\x1b\\harmless link\x1b]8;;\x1b\\"  # OSC 8 hyperlink to a local file
    "\x1b[2J\x1b[H\x1b[3;7H\x1b[1A\x1b[31m"  # CSI: clear the screen, move the cursor, colour
    "\x1bP+q544e\x1b\\"  # DCS (a termcap query)
    "\x9b2J\x9d0;c1-title\x07"  # C1: one-character CSI and OSC
    "\u202etxt.exe\u202c \u2066isolate\u2069 \u200e\u200f\u061c"  # bidi overrides, isolates, marks
    "\x07\x08\r\x00"  # BEL, backspace, a bare carriage return, NUL
    "\nsecond line"
)

_ZONE: Final = re.compile(r"(Z|z|[+-]\d{2}:\d{2})$")


def check_faults(names: Iterable[str]) -> frozenset[str]:
    """The faults as a set.

    Raises:
        ConfigurationError: A name that is not in :data:`FAULTS`.
    """
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        raise ConfigurationError(f"unknown fault {', '.join(unknown)}; the faults are: {', '.join(sorted(FAULTS))}")
    return chosen


def naive_time(text: str) -> str:
    """``text`` without its zone (``2026-12-01T13:06:35.841840Z`` -> ``2026-12-01T13:06:35.841840``)."""
    return _ZONE.sub("", text)
