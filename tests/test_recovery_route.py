"""Where a session goes (``acp_client._recovery._decisions.route``, docs/many-instances.md: the first table of the one
decision module, used with one instance and after a fan-out): every probe combination across
three instances, written-out cases, and property tests — a session is never loaded or resumed on
two instances. Instances are named by their index here."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_client._recovery import _decisions as _recovery
from acp_client._recovery._decisions import Route, RouteKind
from acp_client.state import Probe

A, N, U, X = Probe.ACTIVE, Probe.INACTIVE, Probe.UNKNOWN, Probe.UNREACHABLE
ALL = (A, N, U, X)


def route(
    answers: tuple[Probe, ...] | list[Probe], home: int | None = None, order: tuple[int, ...] | None = None
) -> Route[int]:
    return _recovery.route(list(enumerate(answers)), home, order)


def oracle(answers: tuple[Probe, ...], home: int | None, order: tuple[int, ...]) -> tuple[RouteKind, object]:
    """docs/many-instances.md / issue 11 in the plainest words: an independent statement of the rule."""
    for wanted, kind in ((A, RouteKind.RESUME), (N, RouteKind.REPLAY)):
        holders = [index for index in order if answers[index] is wanted]
        if holders:
            return kind, (home if home in holders else holders[0])
    reachable = tuple(index for index in order if answers[index] is U)
    if reachable:
        return RouteKind.NEW_SESSION, reachable
    return RouteKind.UNAVAILABLE, None


@pytest.mark.parametrize("answers", list(itertools.product(ALL, repeat=3)), ids=lambda a: "-".join(p.value for p in a))
def test_every_combination_across_three_instances(answers: tuple[Probe, ...]) -> None:
    for home in (None, 0, 1, 2):
        for order in itertools.permutations(range(3)):
            decided = route(answers, home, order)
            kind, target = oracle(answers, home, order)
            assert decided.kind is kind, (answers, home, order, decided)
            if kind in (RouteKind.RESUME, RouteKind.REPLAY):
                assert decided.endpoint == target and decided.candidates == ()
            elif kind is RouteKind.NEW_SESSION:
                assert decided.endpoint is None and decided.candidates == target
            else:
                assert decided.endpoint is None and decided.candidates == ()
            assert decided.reason


@pytest.mark.parametrize(
    ("answers", "home", "expected"),
    [
        # the issue's own example: one unreachable, one active, two inactive -> resume where active
        ((X, A, N, N), 2, Route(RouteKind.RESUME, 1)),
        ((X, A, N, N), None, Route(RouteKind.RESUME, 1)),
        # inactive: the home instance when it is back, else the first inactive
        ((N, N, U), 1, Route(RouteKind.REPLAY, 1)),
        ((X, N, N), 0, Route(RouteKind.REPLAY, 1)),
        ((U, N, N), 0, Route(RouteKind.REPLAY, 1)),
        # active on the home instance beats an active elsewhere (never both)
        ((A, A, X), 1, Route(RouteKind.RESUME, 1)),
        # -32002 everywhere reachable: a new session among the reachable ones
        ((U, X, U), 1, Route(RouteKind.NEW_SESSION, None, (0, 2))),
        ((X, X, X), 0, Route(RouteKind.UNAVAILABLE)),
        ((), None, Route(RouteKind.UNAVAILABLE)),
    ],
)
def test_written_out_cases(answers: tuple[Probe, ...], home: int | None, expected: Route) -> None:
    decided = route(answers, home)
    assert (decided.kind, decided.endpoint, decided.candidates) == (
        expected.kind,
        expected.endpoint,
        expected.candidates,
    )


def test_order_names_who_answered_first() -> None:
    assert route((N, N, N), None, order=(2, 0)).endpoint == 2
    assert route((U, U, X), None, order=(1,)).candidates == (1, 0)
    assert route((N, N), 0, order=(1, 0)).endpoint == 0  # the home instance still wins


def test_bad_home_or_order_is_refused() -> None:
    with pytest.raises(ValueError, match="home"):
        route((A, N), 2)
    with pytest.raises(ValueError, match="order"):
        route((A, N), None, order=(0, 5))


@settings(max_examples=300, deadline=None)
@given(
    answers=st.lists(st.sampled_from(ALL), min_size=0, max_size=8),
    data=st.data(),
)
def test_one_target_and_never_a_load_beside_an_active(answers: list[Probe], data: st.DataObject) -> None:
    home = data.draw(st.none() | st.integers(0, len(answers) - 1)) if answers else None
    order = data.draw(st.permutations(range(len(answers))))
    decided = route(answers, home, order)
    if decided.kind in (RouteKind.RESUME, RouteKind.REPLAY):
        assert decided.endpoint is not None
        assert answers[decided.endpoint] is (A if decided.kind is RouteKind.RESUME else N)
    else:
        assert decided.endpoint is None
    if A in answers:  # resumed where it is active; never replayed (loaded) anywhere else
        assert decided.kind is RouteKind.RESUME
    if decided.kind is RouteKind.NEW_SESSION:
        assert A not in answers and N not in answers
        assert set(decided.candidates) == {i for i, answer in enumerate(answers) if answer is U}
    if home is not None and answers[home] in (A, N) and not (answers[home] is N and A in answers):
        assert decided.endpoint == home  # the home instance first when it has the session


# -- a world of instances, crashes and evictions: the session is never in memory on two ---------


class World:
    """Instances that hold one session in memory and/or in a store; dead instances lose memory."""

    def __init__(self, count: int, *, shared_store: bool) -> None:
        self.alive = [True] * count
        self.memory = [False] * count
        self.stored = [False] * count
        self.shared_store = shared_store
        self.home = 0
        self.memory[0] = self.stored[0] = True
        if shared_store:
            self.stored = [True] * count
        self.loads = 0

    def answers(self) -> list[Probe]:
        result = []
        for index, alive in enumerate(self.alive):
            if not alive:
                result.append(X)
            elif self.memory[index]:
                result.append(A)
            elif self.stored[index]:
                result.append(N)
            else:
                result.append(U)
        return result

    def act(self, event: str, index: int) -> None:
        if event == "crash":
            self.alive[index], self.memory[index] = False, False
        elif event == "start":
            self.alive[index] = True
        elif event == "evict":  # the instance saves the session and drops it from memory
            self.memory[index] = False
        elif event == "forget":  # storage lost (separate stores only)
            if not self.shared_store:
                self.memory[index] = self.stored[index] = False
        elif event == "recover":
            self.recover()

    def recover(self) -> None:
        decided = route(self.answers(), self.home)
        if decided.kind in (RouteKind.RESUME, RouteKind.REPLAY):
            assert decided.endpoint is not None
            self.memory[decided.endpoint] = True  # resume keeps it in memory, load brings it in
            self.home = decided.endpoint
            self.loads += 1
        elif decided.kind is RouteKind.NEW_SESSION:
            # a new session replaces the old one everywhere (the old id is dropped)
            chosen = decided.candidates[0]
            self.memory = [i == chosen for i in range(len(self.alive))]
            self.stored = [self.shared_store or i == chosen for i in range(len(self.alive))]
            self.home = chosen
        assert sum(self.memory) <= 1, f"session in memory on several instances: {self.memory}"


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(1, 4),
    shared_store=st.booleans(),
    events=st.lists(
        st.tuples(st.sampled_from(["crash", "start", "evict", "forget", "recover"]), st.integers(0, 3)),
        max_size=30,
    ),
)
def test_the_session_is_never_in_memory_on_two_instances(
    count: int, shared_store: bool, events: list[tuple[str, int]]
) -> None:
    world = World(count, shared_store=shared_store)
    for event, index in events:
        world.act(event, index % count)
        assert sum(world.memory) <= 1
    world.recover()
