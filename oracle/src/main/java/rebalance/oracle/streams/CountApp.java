package rebalance.oracle.streams;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams application of the Streams scenarios (docs/streams.md): it counts the records
 * of each key of {@code input.topic} in a state store ({@code counts}, in memory, backed by its
 * changelog topic) and writes each new count to {@code output.topic} (key, count as a decimal
 * string). Run as {@code CountApp FILE.properties}: the file holds Streams' own settings
 * (application.id, bootstrap.servers, num.standby.replicas, ...) and the two topics.
 *
 * <p>What the scenario reads off it: one JSON line on stdout each time the instance's state or its
 * tasks change ({@code {"t": ms, "state": "RUNNING", "active": ["0_1", ...], "standby": [...]}},
 * from {@code KafkaStreams.metadataForLocalThreads}). SIGTERM closes it (the shutdown hook);
 * Streams leaves the group on close only when asked ({@code leave.group.on.close=true} here).
 */
public final class CountApp {
    public static void main(String[] args) throws IOException, InterruptedException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String input = (String) props.remove("input.topic");
        String output = (String) props.remove("output.topic");
        boolean leave = Boolean.parseBoolean((String) props.remove("leave.group.on.close"));
        props.putIfAbsent("default.key.serde", Serdes.StringSerde.class.getName());
        props.putIfAbsent("default.value.serde", Serdes.StringSerde.class.getName());

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream()
                .mapValues(v -> Long.toString(v))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(leave ? org.apache.kafka.streams.CloseOptions.groupMembershipOperation(
                    org.apache.kafka.streams.CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(30)) : org.apache.kafka.streams.CloseOptions.timeout(Duration.ofSeconds(30)));
            closed.countDown();
        }));
        streams.start();
        String last = "";
        while (closed.getCount() > 0) {
            String now = show(streams, streams.state());
            if (!now.equals(last)) {
                System.out.println("{\"t\": " + System.currentTimeMillis() + ", " + now.substring(1));
                System.out.flush();
                last = now;
            }
            closed.await(200, java.util.concurrent.TimeUnit.MILLISECONDS);
        }
    }

    private static String show(KafkaStreams streams, KafkaStreams.State state) {
        TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
        try {
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                for (TaskMetadata m : t.activeTasks()) active.add(m.taskId().toString());
                for (TaskMetadata m : t.standbyTasks()) standby.add(m.taskId().toString());
            }
        } catch (RuntimeException e) {
            // not running yet, or closing
        }
        return "{\"state\": \"" + state + "\", \"active\": " + list(active) + ", \"standby\": " + list(standby) + "}";
    }

    private static String list(TreeSet<String> tasks) {
        StringBuilder b = new StringBuilder("[");
        for (String t : tasks) b.append(b.length() > 1 ? ", " : "").append('"').append(t).append('"');
        return b.append(']').toString();
    }
}
