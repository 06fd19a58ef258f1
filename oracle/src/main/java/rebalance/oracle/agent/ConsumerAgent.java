package rebalance.oracle.agent;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * One Apache Kafka 4.4.0 Java consumer (KafkaConsumer, the classic or the KIP-848 protocol) for
 * the interop tests, driven as tests/interop/agent.py drives the Python clients.
 *
 * <p>Command line: {@link Options}. Prints the records of an observed log (spec/OBSERVED.md,
 * without the header) on stdout, one JSON line each: every rebalance callback of its
 * ConsumerRebalanceListener, "assigned" taken on entry and "revoked" / "lost" on exit, so that
 * intervals of ownership are never shorter than the real ones; every commit made on command
 * with its outcome; "consumed" records with --consumed; "closed" once the consumer is closed.
 *
 * <p>Reads commands on stdin, one a line, carried out on the polling thread between polls
 * (KafkaConsumer is not thread-safe):
 * <ul>
 * <li>{@code close [leave|remain]}: close the consumer gracefully (as does the end of stdin): by
 *     default a dynamic member sends LeaveGroup and a static one does not (KIP-345); {@code leave}
 *     makes a static member leave too, {@code remain} keeps a dynamic one in the group until its
 *     session times out (CloseOptions.GroupMembershipOperation, KIP-1092);</li>
 * <li>{@code commit PARTITION OFFSET}: commitSync of that offset, if the callbacks so far say
 *     the partition is owned, as a correct application commits only what it owns (a zombie
 *     that has not yet learned of its loss does): outcome "ok", "error" with the exception's
 *     simple name (CommitFailedException, RebalanceInProgressException, ...), or "unknown"
 *     on a TimeoutException;</li>
 * <li>{@code pause} / {@code resume}: KafkaConsumer.pause of every assigned partition /
 *     resume of every paused one (fetching stops; the membership does not);</li>
 * <li>{@code stall MS}: stop calling poll for MS ms (the heartbeat thread runs on: past
 *     max.poll.interval.ms the consumer leaves the group itself, KIP-62), between a "paused"
 *     and a "resumed" marker: the application, busy elsewhere, keeps what it owns until its
 *     next poll tells it otherwise (a zombie, spec/OBSERVED.md).</li>
 * </ul>
 * An unknown or malformed command is reported on stderr and ignored.
 *
 * <p>Exit: 0 once closed; 1 if the consumer failed fatally (an exception out of poll, e.g.
 * FencedInstanceIdException for a duplicate group.instance.id): a line "fatal NAME: message"
 * on stdout, then the consumer is closed and "closed" printed; 2 on bad arguments (or a
 * value the consumer's ConfigDef refuses).
 */
public final class ConsumerAgent implements ConsumerRebalanceListener {
    static final Duration POLL = Duration.ofMillis(100);
    static final Duration CLOSE = Duration.ofSeconds(30);
    static final Map<String, GroupMembershipOperation> CLOSE_OPERATIONS = Map.of(
            "leave", GroupMembershipOperation.LEAVE_GROUP, "remain", GroupMembershipOperation.REMAIN_IN_GROUP);

    private final Options options;
    private final Observed log;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final BlockingQueue<String> commands = new LinkedBlockingQueue<>();
    private final Set<Integer> owned = new HashSet<>();  // partitions of the topic, from the callbacks
    private GroupMembershipOperation membership = GroupMembershipOperation.DEFAULT;  // what close does

    private ConsumerAgent(Options options) {
        this.options = options;
        this.log = new Observed(System.out, options.name,
                options.consumer.getProperty(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG));
        this.consumer = new KafkaConsumer<>(options.consumer);
    }

    public static void main(String[] args) {
        ConsumerAgent agent;
        try {
            agent = new ConsumerAgent(Options.parse(args));
        } catch (ConfigException e) {  // a value the consumer refuses
            System.err.println("error: " + e.getMessage());
            System.exit(2);
            return;
        }
        agent.readCommands();
        System.exit(agent.run());
    }

    /** stdin's lines onto the command queue, from a daemon thread; its end is a close. */
    private void readCommands() {
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    commands.add(line.trim());
                }
            } catch (IOException e) {
                System.err.println("stdin: " + e);
            }
            commands.add("close");
        }, "agent-stdin");
        reader.setDaemon(true);
        reader.start();
    }

    /** Subscribe and poll until told to close; the exit code. */
    private int run() {
        int code = 0;
        try {
            consumer.subscribe(List.of(options.topic), this);
            while (true) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    if (options.consumed) {
                        log.consumed(r.topic(), r.partition(), r.offset());
                    }
                }
                String command = commands.poll();
                while (command != null && carryOut(command)) {
                    command = commands.poll();
                }
                if (command != null) {
                    break;
                }
            }
        } catch (KafkaException | InterruptedException e) {
            log.fatal(e);
            code = 1;
        }
        try {
            consumer.close(CloseOptions.timeout(CLOSE).withGroupMembershipOperation(membership));
        } catch (KafkaException e) {  // a fatal state may fail the close too: the consumer is closed anyway
            System.err.println("close: " + e);
        }
        log.marker("closed");
        return code;
    }

    /** Carry out one command line; false if it is {@code close}. */
    private boolean carryOut(String line) throws InterruptedException {
        try {
            return carryOut(line.split("\\s+"));
        } catch (IllegalArgumentException | ArrayIndexOutOfBoundsException e) {
            System.err.println("bad command: " + line);
            return true;
        }
    }

    private boolean carryOut(String[] words) throws InterruptedException {
        switch (words[0]) {
            case "close":
                membership = words.length == 1 ? GroupMembershipOperation.DEFAULT : CLOSE_OPERATIONS.get(words[1]);
                if (membership == null) {
                    throw new IllegalArgumentException(words[1]);
                }
                return false;
            case "commit":
                int partition = Integer.parseInt(words[1]);
                if (owned.contains(partition)) {
                    commit(new TopicPartition(options.topic, partition), Long.parseLong(words[2]));
                }
                return true;
            case "pause":
                consumer.pause(consumer.assignment());
                return true;
            case "resume":
                consumer.resume(consumer.paused());
                return true;
            case "stall":
                long ms = Long.parseLong(words[1]);
                log.marker("paused");
                Thread.sleep(ms);
                log.marker("resumed");
                return true;
            default:
                System.err.println("unknown command: " + String.join(" ", words));
                return true;
        }
    }

    private void commit(TopicPartition tp, long offset) {
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(tp, new OffsetAndMetadata(offset));
        BigDecimal sent = Observed.nowMs();
        try {
            consumer.commitSync(offsets);
            log.commit(offsets, "ok", sent, null);
        } catch (TimeoutException e) {
            log.commit(offsets, "unknown", sent, e.getClass().getSimpleName());
        } catch (FencedInstanceIdException e) {
            log.commit(offsets, "error", sent, e.getClass().getSimpleName());
            throw e;
        } catch (KafkaException e) {
            log.commit(offsets, "error", sent, e.getClass().getSimpleName());
        }
    }

    private void track(boolean assigned, Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            if (assigned) {
                owned.add(tp.partition());
            } else {
                owned.remove(tp.partition());
            }
        }
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        log.callback("assigned", partitions);
        track(true, partitions);
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        track(false, partitions);
        log.callback("revoked", partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        track(false, partitions);
        log.callback("lost", partitions);
    }
}
