package rebalance.oracle.connect;

import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * One task of {@link SequenceSourceConnector}: its source partition is {@code {"task": i}}, its
 * source offset {@code {"seq": n}}; it starts from the committed offset plus one (0 when none)
 * and returns one record per poll, every {@code interval.ms}.
 */
public final class SequenceSourceTask extends SourceTask {
    private String topic;
    private String key;
    private long intervalMs;
    private Map<String, Object> partition;
    private long next;

    @Override
    public void start(Map<String, String> props) {
        topic = props.get(SequenceSourceConnector.TOPIC);
        intervalMs = Long.parseLong(props.getOrDefault(SequenceSourceConnector.INTERVAL_MS, "200"));
        int id = Integer.parseInt(props.get(SequenceSourceConnector.TASK_ID));
        key = props.get(SequenceSourceConnector.CONNECTOR) + "-" + id;
        partition = Map.of("task", key);
        Map<String, Object> offset = context.offsetStorageReader().offset(partition);
        next = offset == null ? 0 : ((Number) offset.get("seq")).longValue() + 1;
    }

    @Override
    public List<SourceRecord> poll() throws InterruptedException {
        Thread.sleep(intervalMs);
        long seq = next++;
        return List.of(new SourceRecord(partition, Map.of("seq", seq), topic, null,
                Schema.STRING_SCHEMA, key, Schema.STRING_SCHEMA, Long.toString(seq)));
    }

    @Override
    public void stop() {
    }

    @Override
    public String version() {
        return "1";
    }
}
