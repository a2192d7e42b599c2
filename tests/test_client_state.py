"""The one publisher of a connection state (``acp_client._link._client_state``): its rules without a loop."""

from __future__ import annotations

from acp_client import ConnectionState, State
from acp_client._link._client_state import StateMachine


def test_each_change_is_published_once_legally_and_nothing_after_the_end() -> None:
    seen: list[ConnectionState] = []
    machine = StateMachine(seen.append)
    machine.set(ConnectionState(State.CONNECTED))
    machine.set(ConnectionState(State.CONNECTED))  # the same state again
    machine.set(ConnectionState(State.RECONNECTING, attempt=1, retry_in=1.0))
    machine.set(ConnectionState(State.RECONNECTING, attempt=1, retry_in=2.0))  # the same attempt again
    machine.set(ConnectionState(State.CONNECTED))  # not legal from reconnecting: held
    machine.set(ConnectionState(State.SUSPENDED, attempt=2, retry_in=4.0))
    machine.set(ConnectionState(State.RECONNECTING, attempt=3, retry_in=8.0))  # still down: suspended
    machine.set(ConnectionState(State.FAILED, cause="gave up"))
    machine.set(ConnectionState(State.CLOSED))
    assert [(s.state, s.attempt) for s in seen] == [
        (State.CONNECTED, None),
        (State.RECONNECTING, 1),
        (State.SUSPENDED, 2),
        (State.SUSPENDED, 3),
        (State.FAILED, None),
    ]
    assert machine.state.state is State.FAILED


def test_a_listener_that_raises_does_not_stop_the_machine() -> None:
    def boom(state: ConnectionState) -> None:
        raise ValueError("listener bug")

    machine = StateMachine(boom)
    machine.set(ConnectionState(State.CONNECTED))
    assert machine.state.state is State.CONNECTED
