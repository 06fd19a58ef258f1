package rebalance.oracle.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A source connector for the Connect scenarios (docs/connect.md): {@code tasks.max} tasks, task
 * {@code i} writing the records {@code key "CONNECTOR-i", value "SEQ"} to {@code topic}, SEQ
 * counting up from where the task's committed source offset left it, one record every
 * {@code interval.ms}. So a task that runs writes a growing sequence, a task that stops
 * writes nothing, and a task restarted on another worker goes on from its last committed
 * offset: what reaches the topic shows which tasks ran and whether any was lost.
 *
 * <p>Kafka 4.4.0 ships no such connector in connect-runtime (its VerifiableSourceConnector
 * moved to the unpublished test-plugins module), so the oracle brings this one, found by
 * ServiceLoader (META-INF/services; {@code plugin.discovery=service_load}).
 */
public final class SequenceSourceConnector extends SourceConnector {
    static final String TOPIC = "topic";
    static final String INTERVAL_MS = "interval.ms";
    static final String TASK_ID = "task.id";
    static final String CONNECTOR = "connector.name";
    static final ConfigDef CONFIG = new ConfigDef()
            .define(TOPIC, ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic the tasks write to")
            .define(INTERVAL_MS, ConfigDef.Type.LONG, 200L, ConfigDef.Importance.LOW, "ms between two records of a task");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = new HashMap<>(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SequenceSourceTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            Map<String, String> c = new HashMap<>(props);
            c.put(TASK_ID, Integer.toString(i));
            c.put(CONNECTOR, props.get("name"));
            configs.add(c);
        }
        return configs;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return "1";
    }
}
