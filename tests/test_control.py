"""Issue 42 item 7: the control endpoint of ``rebalance serve`` (impl/control.py)
that nobody else can drive: a token on every request, state changed only by POST
with JSON, Host checked against loopback and Origin refused, bounded bodies,
connections and values, JSON errors; ``rebalance ctl`` and the pytest fixture
pass the token without the user seeing it. Against a real serve process."""
import http.client
import json
import os
import socket
import stat
import time

import pytest

from conftest import run_cli
from rebalance.impl import control
from rebalance.testing import Cluster


@pytest.fixture(scope="module")
def cluster():
    with Cluster({"t": 2}, subprocess=True) as c:
        yield c


def ask(cluster, method, path, body=None, headers=None, token=True):
    """(status, JSON answer) of one request to the control endpoint."""
    host, port = cluster.control_address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {control.read_token(cluster.control_address)}"
    h.update(headers or {})
    conn.request(method, path, body=body if body is None or isinstance(body, bytes) else json.dumps(body).encode(),
                 headers=h)
    r = conn.getresponse()
    answer = r.status, json.loads(r.read())
    conn.close()
    return answer


def raw(cluster, data: bytes) -> tuple:
    """(status, JSON answer) of raw bytes sent to the endpoint."""
    host, port = cluster.control_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
            if b"\r\n\r\n" in got and len(got.split(b"\r\n\r\n", 1)[1]) >= int(
                    got.split(b"Content-Length: ")[1].split(b"\r\n")[0]):
                break
    head, body = got.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body)


def paused(cluster) -> bool:
    return ask(cluster, "GET", "/status")[1]["paused"]


def test_the_token_is_required_and_kept_in_a_file_only_the_user_reads(cluster):
    path = control.token_path(int(cluster.control_address.rsplit(":", 1)[1]))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert any(control.read_token(cluster.control_address) in line for line in cluster.log)  # printed at start
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic " + "x" * 40}):
        status, answer = ask(cluster, "POST", "/pause", {}, headers, token=False)
        assert status == 401 and "token" in answer["error"], answer
    assert not paused(cluster)


def test_state_changes_only_by_post_with_json(cluster):
    status, answer = ask(cluster, "GET", "/pause")
    assert status == 405 and "POST" in answer["error"] and not paused(cluster)
    status, answer = ask(cluster, "POST", "/pause", b"{}", {"Content-Type": "text/plain"})
    assert status == 415 and not paused(cluster)
    status, answer = ask(cluster, "POST", "/pause", b"[1]")
    assert status == 400 and not paused(cluster)
    assert ask(cluster, "POST", "/pause", {}) == (200, {"paused": True})
    assert ask(cluster, "POST", "/resume", {})[0] == 200 and not paused(cluster)


def test_cross_origin_and_foreign_hosts_are_refused(cluster):
    """A web page on the same machine (CSRF) sends an Origin; one served by a name
    rebound to 127.0.0.1 (DNS rebinding) sends its own Host."""
    status, answer = ask(cluster, "POST", "/pause", {}, {"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin" in answer["error"]
    status, answer = ask(cluster, "POST", "/pause", {}, {"Host": "evil.example:80"})
    assert status == 421 and "loopback" in answer["error"]
    assert not paused(cluster)
    assert ask(cluster, "GET", "/status", headers={"Host": f"localhost:{cluster.control_address.split(':')[1]}"})[0] \
        == 200


def test_bodies_values_and_headers_are_bounded_and_answered_in_json(cluster):
    token = control.read_token(cluster.control_address)
    head = f"POST /inject HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n" \
           "Content-Type: application/json\r\n"
    t0 = time.monotonic()
    status, answer = raw(cluster, (head + "Content-Length: 209715200\r\n\r\n").encode())  # 200 MiB, never sent
    assert status == 413 and time.monotonic() - t0 < 5
    status, answer = raw(cluster, (head + "Content-Length: 12abc\r\n\r\n").encode())
    assert status == 400 and "Content-Length" in answer["error"]
    status, answer = raw(cluster, (head + "\r\n").encode())
    assert status == 411
    for args, word in (({"api": "Heartbeat", "delay_ms": 2 ** 62}, "delay_ms"),
                       ({"api": "Heartbeat", "drop": True, "count": 0}, "count"),
                       ({"api": "Heartbeat", "drop": True, "for_ms": 10 ** 12}, "for_ms"),
                       ({"api": "Heartbeat", "drop": True, "member": "m" * 5000}, "member"),
                       ({"api": ["Heartbeat"], "drop": True}, "inject")):
        status, answer = ask(cluster, "POST", "/inject", args)
        assert status == 400 and word in answer["error"], (args, answer)
    status, answer = raw(cluster, b"NOT HTTP AT ALL\r\n\r\n")
    assert status == 400 and answer["error"]
    assert ask(cluster, "GET", "/status")[1]["rules"] == []


def test_connections_are_bounded_and_idle_ones_do_not_pile_up_threads(cluster):
    host, port = cluster.control_address.rsplit(":", 1)
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(control.MAX_CONNECTIONS)]
    try:
        time.sleep(0.5)
        with socket.create_connection((host, int(port)), timeout=10) as extra:
            assert b"503" in extra.recv(4096).split(b"\r\n")[0]
    finally:
        for s in idle:
            s.close()
    time.sleep(0.5)
    assert ask(cluster, "GET", "/status")[0] == 200


def test_ctl_and_the_fixture_pass_the_token(cluster, tmp_path):
    code, out, err = run_cli("ctl", "--control", cluster.control_address, "--json", "pause")
    assert code == 0 and json.loads(out) == {"paused": True}, err
    cluster.resume()  # the fixture's Cluster, through HTTP with the token it read itself
    assert not paused(cluster)
    code, out, err = run_cli("ctl", "--control", cluster.control_address, "--token", "wrong", "pause")
    assert code == 2 and "token" in err and not paused(cluster)
