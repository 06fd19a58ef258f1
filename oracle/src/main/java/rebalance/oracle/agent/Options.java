package rebalance.oracle.agent;

import java.util.List;
import java.util.Map;
import java.util.Properties;

import net.sourceforge.argparse4j.ArgumentParsers;
import net.sourceforge.argparse4j.impl.Arguments;
import net.sourceforge.argparse4j.inf.ArgumentParser;
import net.sourceforge.argparse4j.internal.HelpScreenException;
import net.sourceforge.argparse4j.inf.ArgumentParserException;
import net.sourceforge.argparse4j.inf.Namespace;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The agent's command line (tests/interop/agent.py's shape, without its CLIENT argument),
 * parsed with argparse4j (the parser Kafka's own tools use) into the consumer's properties.
 *
 * <pre>
 * NAME --bootstrap HOST:PORT --group G --topic T [--session-ms MS] [--instance-id ID]
 *      [--strategy range|roundrobin|sticky|cooperative-sticky (classic) | uniform|range (consumer)]
 *      [--group-protocol classic|consumer] [--heartbeat-ms MS] [--max-poll-ms MS]
 *      [--auto-commit on|off] [--consumed]
 * </pre>
 *
 * <p>NAME is the client.id and the observed log's member. --max-poll-ms is
 * max.poll.interval.ms, which the classic protocol also sends as the JoinGroup's rebalance
 * timeout (ConsumerCoordinator's constructor, Kafka 4.4.0). Under group.protocol=consumer
 * (KIP-848) the broker owns the session and heartbeat settings and the assignor: the client
 * refuses session.timeout.ms, heartbeat.interval.ms and partition.assignment.strategy
 * (ConsumerConfig.CONSUMER_PROTOCOL_UNSUPPORTED_CONFIGS), so they are left out and --strategy
 * names group.remote.assignor (uniform or range). Bad input: usage on stderr, exit 2.
 */
final class Options {
    /** --strategy under the classic protocol: partition.assignment.strategy's class. */
    static final Map<String, Class<?>> ASSIGNORS = Map.of(
            "range", RangeAssignor.class, "roundrobin", RoundRobinAssignor.class,
            "sticky", StickyAssignor.class, "cooperative-sticky", CooperativeStickyAssignor.class);
    /** --strategy under the consumer protocol: group.remote.assignor (KIP-848's server-side assignors). */
    static final List<String> REMOTE_ASSIGNORS = List.of("uniform", "range");
    static final int AUTO_COMMIT_INTERVAL_MS = 500;  // as agent.py's
    static final int METADATA_MAX_AGE_MS = 1000;     // as agent.py's: new partitions seen within a second

    final String name;
    final String topic;
    final boolean consumed;
    final Properties consumer = new Properties();

    private Options(Namespace a, ArgumentParser p) throws ArgumentParserException {
        name = a.getString("name");
        topic = a.getString("topic");
        consumed = a.getBoolean("consumed");
        String protocol = a.getString("group_protocol");
        String strategy = a.getString("strategy");
        consumer.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.getString("bootstrap"));
        consumer.put(ConsumerConfig.GROUP_ID_CONFIG, a.getString("group"));
        consumer.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        consumer.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (a.getString("instance_id") != null) {
            consumer.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.getString("instance_id"));
        }
        if (protocol.equals("classic")) {
            strategy = strategy == null ? "cooperative-sticky" : strategy;
            if (!ASSIGNORS.containsKey(strategy)) {
                throw new ArgumentParserException("argument --strategy: " + strategy + " (classic protocol) is not one of "
                        + ASSIGNORS.keySet(), p);
            }
            consumer.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, ASSIGNORS.get(strategy).getName());
            consumer.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, a.getInt("session_ms"));
            consumer.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, a.getInt("heartbeat_ms"));
        } else {
            if (strategy != null && !REMOTE_ASSIGNORS.contains(strategy)) {
                throw new ArgumentParserException("argument --strategy: " + strategy + " (consumer protocol, "
                        + "group.remote.assignor) is not one of " + REMOTE_ASSIGNORS, p);
            }
            if (strategy != null) {  // none: the broker's default assignor
                consumer.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, strategy);
            }
        }
        consumer.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, a.getInt("max_poll_ms"));
        consumer.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, a.getString("auto_commit").equals("on"));
        consumer.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, AUTO_COMMIT_INTERVAL_MS);
        consumer.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, METADATA_MAX_AGE_MS);
        consumer.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumer.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumer.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    }

    static ArgumentParser parser() {
        ArgumentParser p = ArgumentParsers.newArgumentParser("rebalance.oracle.agent.ConsumerAgent")
                .description("One Kafka 4.4.0 Java consumer for the interop tests: observed-log records "
                        + "(spec/OBSERVED.md) on stdout, commands on stdin.");
        p.addArgument("name").help("client.id, and the member of the observed log");
        p.addArgument("--bootstrap").required(true).help("HOST:PORT");
        p.addArgument("--group").required(true);
        p.addArgument("--topic").required(true);
        p.addArgument("--instance-id").help("group.instance.id (KIP-345 static membership)");
        p.addArgument("--session-ms").type(Integer.class).setDefault(6000).help("session.timeout.ms (classic)");
        p.addArgument("--heartbeat-ms").type(Integer.class).setDefault(300).help("heartbeat.interval.ms (classic)");
        p.addArgument("--max-poll-ms").type(Integer.class).setDefault(300_000)
                .help("max.poll.interval.ms, also the classic JoinGroup's rebalance timeout");
        p.addArgument("--strategy")
                .help("classic: range, roundrobin, sticky, cooperative-sticky (default); consumer: uniform, range "
                        + "(default: the broker's)");
        p.addArgument("--group-protocol").choices("classic", "consumer").setDefault("classic")
                .help("group.protocol (consumer: KIP-848)");
        p.addArgument("--auto-commit").choices("on", "off").setDefault("on")
                .help("enable.auto.commit, every " + AUTO_COMMIT_INTERVAL_MS + " ms when on");
        p.addArgument("--consumed").action(Arguments.storeTrue())
                .help("print a `consumed` record for every record polled");
        return p;
    }

    /** The options of {@code args}; on bad input, usage and the problem on stderr and exit 2. */
    static Options parse(String[] args) {
        ArgumentParser p = parser();
        try {
            return new Options(p.parseArgs(args), p);
        } catch (HelpScreenException e) {  // --help, printed
            System.exit(0);
            return null;
        } catch (ArgumentParserException e) {
            p.handleError(e);
            System.exit(2);
            return null;
        }
    }
}
