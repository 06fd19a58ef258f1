"""A transparent Kafka-wire proxy that records group traffic (``rebalance proxy``).

Put it in front of any broker (``rebalance serve``, Apache Kafka, another
implementation) and point clients at it: every client connection gets its own
upstream connection and frames are forwarded unchanged, in order, both ways,
except three responses rewritten so that clients stay on the proxy (decoded and
re-encoded with kio at the client's version, impl/wire.py):

* Metadata: every broker's host and port become a port of the proxy;
* FindCoordinator: the coordinator's host and port likewise (v0-3 and v4's
  per-key coordinators);
* ApiVersions: the max versions of Metadata, FindCoordinator and the group APIs
  are capped at those the proxy reads (wire.SUPPORTED), so every frame it must
  rewrite or record parses.

Brokers: the ``--listen`` port stands for the ``--upstream`` broker; any other
broker a Metadata or FindCoordinator response names gets a port of its own on
the listening host (any free one, opened when first named), so clients reach
every broker of a cluster through the proxy. A restart of the upstream broker is recorded
only when its restarter calls ``restarted``. Clients are told the listening
host: listen on an address they can reach, not 0.0.0.0.

Group requests and their responses (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, DeleteGroups, and KIP-848's
ConsumerGroupHeartbeat and ConsumerGroupDescribe, their topic ids named from the
Metadata responses seen) are recorded by a
Recorder (impl/trace.py) with recorder "proxy", as forwarded upstream; the
header's topics come from a Metadata request (v12, every topic) the proxy sends
upstream at start.

Faults (issue 38): ``inject(api, delay_ms=... | drop=True, member=..., count=..., for_ms=...,
request=False)`` (impl/faults.py ``Injections``, the rules serve's fault layer keeps) delays or
drops the upstream's responses to the matching group requests (a member's by its member.id or
client.id, or everyone's) on their way to the client, or with ``request=True`` the requests on
their way to the broker: what a network does to one client. A response's fault is a ``fault``
record (``delay``, ``drop``) after the response, recorded as the broker gave it; a request's
(``delay_request``, ``drop_request``) comes before the request, which is recorded when
forwarded, so a dropped one never is (spec/TRACE.md). A dropped message leaves the client to
its request timeout; messages behind a delayed one on the same connection wait for it, as they
would behind a slow link.

Connections: a client disconnect closes its upstream connection and vice versa;
reading waits for the other side to take what was written (bounded buffering:
at most one frame per direction in the proxy, the rest in the sockets); a frame
that is too large, a response to no request or a rewritten response that does
not parse closes that connection pair only, logged without a traceback.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging

from kio.static.primitive import i32

from rebalance.model.timing import SessionBounds

from .faults import NAME_OF, Injections, member_of
from .member import Wire
from .trace import GROUP_APIS, Recorder, settings
from .wire import (
    SUPPORTED, Api, FrameError, encode_response, read_frame, read_request, read_response, request_key,
    response_correlation, sized,
)

log = logging.getLogger("rebalance.proxy")

MAX_IN_FLIGHT = 1000  # requests forwarded and not yet answered, per connection (Produce acks=0 gets no answer)
CAPPED = GROUP_APIS | {Api.METADATA, Api.FIND_COORDINATOR}
# the versions the proxy reads to rewrite: serve's, and ApiVersions up to v5 (the Java client 4.x
# asks v5, whose answer must be capped too). v4 and v5 have v3's layout (v5 only also lists features
# whose MinSupportedVersion is 0: ApiVersionsResponse.json, kafka-clients 4.4.0), so v5 is read and
# written with kio's v4 schema, the newest kio has.
READS = {**SUPPORTED, Api.API_VERSIONS: (0, 5)}
UNSUPPORTED_VERSION = 35  # Errors.UNSUPPORTED_VERSION
LAYOUT = {(Api.API_VERSIONS, 5): 4}


class Proxy:
    """``listen`` and ``upstream``: (host, port) (listen port 0: any free port,
    then ``port`` holds the real one); ``trace``: a Recorder ("proxy");
    ``initial_delay_ms``, ``session_bounds`` (model/timing.py SessionBounds) and
    ``consumer_session_ms``: the upstream broker's group.initial.rebalance.delay.ms,
    group.min/max.session.timeout.ms and group.consumer.session.timeout.ms, for the trace
    header (the proxy cannot see them; Kafka's defaults)."""

    def __init__(self, listen: tuple, upstream: tuple, trace: Recorder, initial_delay_ms: int = 3000,
                 session_bounds: SessionBounds = SessionBounds(), consumer_session_ms: int = 45_000):
        self.host, self.port = listen
        self.upstream, self.trace, self.initial_delay_ms = upstream, trace, initial_delay_ms
        self.session_bounds, self.consumer_session_ms = session_bounds, consumer_session_ms
        self.injections = Injections(errors=False, requests=True)
        self.routes: dict = {}  # {upstream (host, port): the proxy's port for it}
        self.servers: list = []
        self.relays: set = set()

    async def start(self) -> None:
        """Read the upstream's topics, write the trace header and listen. Raises
        OSError (upstream unreachable, listening address taken) or ConnectionError."""
        boot = await Wire.open(*self.upstream, "rebalance-proxy")
        try:
            meta = await boot.call(Api.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        finally:
            boot.close()
        topics = [(t.name, len(t.partitions)) for t in meta.topics
                  if t.error_code == 0 and not t.is_internal and t.partitions]
        self.trace.begin(settings(topics, self.initial_delay_ms, upstream="%s:%d" % self.upstream,
                                  group_min_session_timeout_ms=self.session_bounds.min_ms,
                                  group_max_session_timeout_ms=self.session_bounds.max_ms,
                                  group_consumer_session_timeout_ms=self.consumer_session_ms))
        self.trace.name_topics((t.topic_id, t.name) for t in meta.topics)
        self.port = await self._listen(self.upstream, self.port)
        log.info("listening on %s:%d, upstream %s:%d, topics %s", self.host, self.port, *self.upstream,
                 ", ".join(f"{t}:{n}" for t, n in topics))

    async def _listen(self, upstream: tuple, port: int) -> int:
        server = await asyncio.start_server(lambda r, w: self._relay(r, w, upstream), self.host, port)
        self.servers.append(server)
        self.routes[upstream] = server.sockets[0].getsockname()[1]
        return self.routes[upstream]

    async def _port_for(self, host: str, port: int) -> int:
        """The proxy's port standing for the upstream broker host:port (opened on first use)."""
        if (host, port) not in self.routes:
            await self._listen((host, port), 0)
            log.info("broker %s:%d through %s:%d", host, port, self.host, self.routes[(host, port)])
        return self.routes[(host, port)]

    async def close(self) -> None:
        for server in self.servers:
            server.close()
        for task in list(self.relays):
            task.cancel()
        self.trace.shut()

    # --- one client connection ------------------------------------------------------------
    async def _relay(self, client_reader, client_writer, upstream: tuple) -> None:
        self.relays.add(asyncio.current_task())
        host = (client_writer.get_extra_info("peername") or ("?",))[0]
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError as e:
            log.warning("closing connection from %s: upstream %s:%d unreachable: %s", host, *upstream, e)
            client_writer.close()
            self.relays.discard(asyncio.current_task())
            return
        trace = self.trace
        name = trace.open(host) if trace.enabled else None
        in_flight: dict = {}  # {correlation id: (api key, version, group request frame or None)}, in order
        tasks = {asyncio.create_task(self._requests(client_reader, up_writer, name, in_flight)),
                 asyncio.create_task(self._responses(up_reader, client_writer, name, in_flight))}
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                e = task.exception()
                if isinstance(e, FrameError):
                    log.warning("closing connection from %s: %s", host, e)
                elif e is not None and not isinstance(e, (asyncio.IncompleteReadError, ConnectionError)):
                    log.error("closing connection from %s after an internal error: %r", host, e)
        except asyncio.CancelledError:
            pass  # the proxy is closing: the relay ends quietly (a cancelled task's end logs a traceback)
        finally:
            for task in tasks:
                task.cancel()
            client_writer.close()
            up_writer.close()
            if trace.enabled:
                trace.close(name)
            self.relays.discard(asyncio.current_task())

    async def _requests(self, reader, writer, name, in_flight: dict) -> None:
        while True:
            frame = await read_frame(reader)
            api_key, version, correlation = request_key(frame)
            if api_key in GROUP_APIS and self.injections.rules and not await self._passes(name, frame, True):
                continue  # dropped on its way in: the broker never sees it, the client times out
            if len(in_flight) >= MAX_IN_FLIGHT:
                raise FrameError(f"more than {MAX_IN_FLIGHT} requests in flight")
            in_flight[correlation] = (api_key, version, frame if api_key in GROUP_APIS else None)
            if self.trace.enabled:
                self.trace.request(name, frame)
            writer.write(sized(frame))
            await writer.drain()

    async def _responses(self, reader, writer, name, in_flight: dict) -> None:
        while True:
            frame = await read_frame(reader)
            correlation = response_correlation(frame)
            if correlation not in in_flight:
                raise FrameError(f"a response with correlation id {correlation} to no request")
            while True:  # requests sent before it got no response (Produce with acks=0)
                sent, (api_key, version, request) = next(iter(in_flight.items()))
                del in_flight[sent]
                if sent == correlation:
                    break
            if api_key in (Api.METADATA, Api.FIND_COORDINATOR, Api.API_VERSIONS):
                frame = await self._rewrite(api_key, version, correlation, frame)
            if self.trace.enabled:
                self.trace.response(name, frame)
            if request is not None and self.injections.rules and not await self._passes(name, request, False):
                continue
            writer.write(sized(frame))
            await writer.drain()

    def restarted(self, groups) -> None:
        """Record that the upstream broker restarted and loaded ``groups`` (a ``restart``
        record, R37): the proxy cannot see it, whoever restarted it says so."""
        self.trace.restart(groups)

    async def _passes(self, name, frame, request: bool) -> bool:
        """Apply a delay or drop rule to group request ``frame`` on its way in
        (``request``) or to its response on its way out: False if it is dropped; each
        recorded as a ``fault`` record (``delay``, ``drop``; ``delay_request``,
        ``drop_request``)."""
        req = read_request(frame)
        rule = self.injections.match(req.api_key, lambda: member_of(req), req.client_id,
                                     lambda r: r.request == request)
        if rule is None:
            return True
        api, suffix = NAME_OF.get(req.api_key, req.api_key), "_request" if request else ""
        if rule.drop:
            self.trace.fault("drop" + suffix, connection=name, correlation_id=req.correlation_id, api=api)
            return False
        self.trace.fault("delay" + suffix, connection=name, correlation_id=req.correlation_id, api=api,
                         delay_ms=rule.delay_ms)
        await asyncio.sleep(rule.delay_ms / 1000)
        return True

    async def _rewrite(self, api_key: int, version: int, correlation: int, frame: bytes) -> bytes:
        """The response with the proxy's addresses (Metadata, FindCoordinator) or
        capped versions (ApiVersions). Raises FrameError if it does not parse
        (ApiVersions: forwarded unchanged, it may be KIP-511's v0 answer)."""
        if api_key == Api.API_VERSIONS and int.from_bytes(frame[4:6], "big", signed=True) == UNSUPPORTED_VERSION:
            return frame  # KIP-511: answered in v0's layout whatever was asked; the client asks again lower
        low, high = READS[api_key]
        if not low <= version <= high:
            if api_key == Api.API_VERSIONS:
                return frame
            raise FrameError(f"API key {api_key} v{version}: a version the proxy cannot rewrite")
        layout = LAYOUT.get((api_key, version), version)
        try:
            _, r = read_response(frame, api_key, layout)
        except FrameError:
            if api_key == Api.API_VERSIONS:
                return frame
            raise
        if api_key == Api.METADATA:
            if self.trace.enabled and version >= 10:  # topic ids (KIP-516), which KIP-848's records name
                self.trace.name_topics((t.topic_id, t.name) for t in r.topics)
            brokers = [dataclasses.replace(b, host=self.host, port=i32(await self._port_for(b.host, b.port)))
                       for b in r.brokers]
            r = dataclasses.replace(r, brokers=tuple(brokers))
        elif api_key == Api.FIND_COORDINATOR:
            if hasattr(r, "coordinators"):  # v4: one per key
                r = dataclasses.replace(r, coordinators=tuple([await self._redirect(c) for c in r.coordinators]))
            else:
                r = await self._redirect(r)
        elif r.error_code == 0:  # ApiVersions
            r = dataclasses.replace(r, api_keys=tuple(
                dataclasses.replace(k, max_version=min(k.max_version, SUPPORTED[k.api_key][1]))
                if k.api_key in CAPPED else k for k in r.api_keys))
        return encode_response(api_key, layout, correlation, r)[4:]

    async def _redirect(self, c):
        """A coordinator (FindCoordinator's answer) at the proxy's port for it; an error left alone."""
        if c.error_code != 0 or c.node_id < 0:
            return c
        return dataclasses.replace(c, host=self.host, port=i32(await self._port_for(c.host, c.port)))
