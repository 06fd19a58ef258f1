package rebalance.oracle.agent;

import java.io.PrintStream;
import java.math.BigDecimal;
import java.time.Instant;
import java.util.Collection;
import java.util.Comparator;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Observed-log records (spec/OBSERVED.md, spec/observed.schema.json) for one member, one JSON
 * line each on a stream (the agent's stdout; the header is the reader's business, as for
 * agent.py). Each record is one {@code println} under the stream's lock, so lines never
 * interleave. {@code t_ms} is wall-clock epoch ms with microseconds, as agent.py's, so
 * that records of several processes on one machine order finely.
 */
final class Observed {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Comparator<TopicPartition> ORDER =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private final PrintStream out;
    private final String member;
    private final String instanceId;

    /** {@code instanceId}: the consumer's group.instance.id (KIP-345), written on its callbacks, or null. */
    Observed(PrintStream out, String member, String instanceId) {
        this.out = out;
        this.member = member;
        this.instanceId = instanceId;
    }

    /** Wall-clock ms since the Unix epoch, to the microsecond (written as 1795807941742.096, not in E notation). */
    static BigDecimal nowMs() {
        Instant now = Instant.now();
        return BigDecimal.valueOf(now.getEpochSecond() * 1_000_000L + now.getNano() / 1000, 3);
    }

    private ObjectNode record(String event, BigDecimal tMs) {
        ObjectNode r = JSON.createObjectNode();
        r.put("t_ms", tMs);
        r.put("member", member);
        r.put("event", event);
        return r;
    }

    private void write(ObjectNode r) {
        synchronized (out) {
            out.println(r.toString());
            out.flush();
        }
    }

    /** A rebalance callback, {@code kind} "assigned" (at entry), "revoked" or "lost" (at exit). */
    void callback(String kind, Collection<TopicPartition> partitions) {
        ObjectNode r = record(kind, nowMs());
        ArrayNode ps = r.putArray("partitions");
        partitions.stream().sorted(ORDER).forEach(tp -> ps.addObject()
                .put("topic", tp.topic()).put("partition", tp.partition()));
        if (instanceId != null) {
            r.put("group_instance_id", instanceId);
        }
        write(r);
    }

    /** A record handed to the application. */
    void consumed(String topic, int partition, long offset) {
        write(record("consumed", nowMs()).put("topic", topic).put("partition", partition).put("offset", offset));
    }

    /**
     * A commit of {@code offsets} sent at {@code sentMs} whose outcome is known now:
     * "ok", "error" (with {@code error}, the exception's simple name) or "unknown".
     */
    void commit(Map<TopicPartition, OffsetAndMetadata> offsets, String outcome, BigDecimal sentMs, String error) {
        ObjectNode r = record("commit", nowMs());
        ArrayNode os = r.putArray("offsets");
        offsets.entrySet().stream().sorted(Map.Entry.comparingByKey(ORDER)).forEach(e -> os.addObject()
                .put("topic", e.getKey().topic()).put("partition", e.getKey().partition())
                .put("offset", e.getValue().offset()));
        r.put("outcome", outcome);
        r.put("sent_ms", sentMs);
        if (error != null) {
            r.put("error", error);
        }
        write(r);
    }

    /**
     * A marker without fields: "closed" once the application closed its consumer; "paused" and
     * "resumed" around a stall of its poll loop.
     */
    void marker(String event) {
        write(record(event, nowMs()));
    }

    /**
     * Not an observed record: a line, starting with "fatal ", that says the consumer failed
     * with an exception the application cannot carry on from (FencedInstanceIdException, ...).
     */
    void fatal(Throwable e) {
        synchronized (out) {
            out.println("fatal " + e.getClass().getSimpleName() + ": " + e.getMessage());
            out.flush();
        }
    }
}
