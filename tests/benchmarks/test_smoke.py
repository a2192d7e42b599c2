"""The benchmarks run end to end (``--quick``) and print their figures.

Nothing here asserts speed: a benchmark reports figures, it does not pass or fail on them. What
is checked: the script exits 0 (the recovery benchmark exits non-zero when the client took another
recovery path than the one it provoked, or an update went missing in the throughput one) and
every expected row of its table carries numbers.
"""

from __future__ import annotations

import re

import pytest

from ._run import NUMBER, rows, run

#: The telemetry rows (issue 19): the API and the SDK are in the dev extra, so all three run.
TELEMETRY = (
    "acp_client on_update, otel off",
    "acp_client on_update, otel API, no SDK",
    "acp_client on_update, otel SDK, in-memory",
)


def test_throughput_prints_updates_per_second_for_every_client_on_both_transports_with_and_without_msgspec() -> None:
    output = run("throughput.py")
    table = rows(output, ("WebSocket", "HTTP"))
    clients = {(row[0], row[1], row[2]) for row in table}
    for transport, raw in (("WebSocket", "raw websockets+json"), ("HTTP", "raw httpx+SSE+json")):
        for extra in ("msgspec", "none"):
            for client in ("acp_client on_update", "acp_client updates()", "official SDK 0.12.1", raw, *TELEMETRY):
                assert (transport, extra, client) in clients, output
    for row in table:
        assert re.fullmatch(NUMBER, row[3]), row  # updates/s
        if row[2].startswith("acp_client"):
            assert re.fullmatch(NUMBER + "x", row[5]), row  # vs official
            assert re.fullmatch(NUMBER + "x", row[6]), row  # vs raw
            assert re.fullmatch(r"(yes|NO) \(>= .*\)", row[7]), row
    assert "targets, in both modes" in output
    assert "telemetry: the on_update client" in output
    costs = r"(WebSocket|HTTP) +(msgspec|none) +(off|API, no SDK|SDK, in-memory)  "
    cost = [line.split() for line in output.splitlines() if re.match(costs, line)]
    assert len(cost) == 12, output  # off, API without SDK, SDK to memory; 2 transports x 2 extras
    assert all(re.fullmatch(NUMBER + "x", line[-1]) for line in cost), output


def test_throughput_without_the_speed_extra_hides_msgspec_from_the_sdk() -> None:
    output = run("throughput.py", "--speed", "without", "--transport", "websocket")
    extras = {row[1] for row in rows(output, ("WebSocket",))}
    assert extras == {"none"}, output


def test_throughput_cold_mode_gives_every_client_a_fresh_agent_and_connection() -> None:
    output = run("throughput.py", "--speed", "with", "--mode", "cold")
    assert "cold: each prompt a fresh client's first" in output, output
    table = rows(output, ("WebSocket", "HTTP"))
    clients = {(row[0], row[2]) for row in table}
    for transport, raw in (("WebSocket", "raw websockets+json"), ("HTTP", "raw httpx+SSE+json")):
        for client in ("acp_client on_update", "acp_client updates()", "official SDK 0.12.1", raw):
            assert (transport, client) in clients, output
    for row in table:
        assert re.fullmatch(NUMBER, row[3]), row


def test_import_time_compares_acp_client_with_the_official_sdk() -> None:
    output = run("import_time.py")
    table = rows(output, ("acp_client", "acp_client (no msgspec)", "acp (official SDK 0.12.1)"))
    assert [row[0] for row in table] == ["acp_client", "acp_client (no msgspec)", "acp (official SDK 0.12.1)"], output
    for row in table:
        assert re.fullmatch(NUMBER, row[1]), row  # ms
    assert "target (issue 22)" in output


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_recovery_prints_latency_and_floor_for_every_path(transport: str) -> None:
    output = run("recovery.py", "--transport", transport)
    name = "WebSocket" if transport == "websocket" else "HTTP"
    table = rows(output, (name,))
    assert [row[1] for row in table] == ["resume", "replay", "new_session"], output
    for row in table:
        usable, slept, net, recovery, floor, ratio = row[2:8]
        for cell in (usable, slept, net, recovery, floor):
            assert re.fullmatch(NUMBER, cell), row
        assert re.fullmatch(NUMBER + "x", ratio), row
        assert float(floor) > 0, row
    assert "target (issue 3)" in output


def test_store_prints_the_restore_time_and_whether_the_target_holds() -> None:
    output = run("store.py", "--sessions", "200")
    table = rows(output, ("0 KiB tail", "4 KiB tail"))
    assert [row[0] for row in table] == ["0 KiB tail", "4 KiB tail"], output
    for row in table:
        assert row[1] == "200", row  # every stored session of the endpoint was restored
        for cell in row[2:]:
            assert re.fullmatch(NUMBER, cell), row
    assert re.search(r"target \(issue 10\): .*: (holds|DOES NOT hold) \(worst median " + NUMBER + " ms\\)", output)


def test_locate_prints_one_probe_fan_out_and_ratio_per_transport_and_delay() -> None:
    output = run("locate.py", "--instances", "10")
    table = rows(output, ("WebSocket", "HTTP"))
    assert sorted((row[0], row[1]) for row in table) == [
        ("HTTP", "0"),
        ("HTTP", "25"),
        ("WebSocket", "0"),
        ("WebSocket", "25"),
    ]
    for row in table:
        one, fan_out, ratio, sequential, client_cpu, farm_cpu, verdict = row[2:9]
        for cell in (one, fan_out, sequential, client_cpu, farm_cpu):
            assert re.fullmatch(NUMBER, cell), row
        assert re.fullmatch(NUMBER + "x", ratio), row
        assert verdict in ("yes", "NO"), row
        per_probe, cpu_verdict = row[9:11]
        assert re.fullmatch(NUMBER, per_probe) and cpu_verdict in ("yes", "NO"), row
    assert "targets (issue 22)" in output


def test_recovery_scale_prints_ms_per_session_and_the_bound_for_both_transports_and_agent_places() -> None:
    output = run("recovery_scale.py", "--agent", "both")
    table = rows(output, ("WebSocket", "HTTP"))
    assert [(row[0], row[1], row[2]) for row in table] == [
        ("WebSocket", "process", "20"),
        ("WebSocket", "process", "100"),
        ("HTTP", "process", "20"),
        ("HTTP", "process", "100"),
        ("WebSocket", "in process", "20"),
        ("WebSocket", "in process", "100"),
        ("HTTP", "in process", "20"),
        ("HTTP", "in process", "100"),
    ], output
    for row in table:
        in_process = row[1] == "in process"
        numbers = [cell for i, cell in enumerate(row[3:10], 3) if not (in_process and i in (6, 9))]
        assert all(re.fullmatch(NUMBER, cell) for cell in numbers), row
        assert int(row[7]) <= 4, row  # in flight: never more than recovery_concurrency (4 by default)
    assert "targets: 10,000 sessions" in output
