package kafkalog.it;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka's own consumer as the reference reader: every partition of the topics named (or only
 * --partition N ones) from the beginning to the end offsets taken at the start (the last stable
 * offsets at read_committed), printed as one JSON object per record on stdout in partition, then
 * offset order: topic, partition, offset, timestamp, timestampType, key and value (base64 or
 * null), headers ([key, base64 value or null]), leaderEpoch.
 *
 * <p>Usage: RefConsumer --bootstrap-server HOST:PORT --topic T [--topic T2] [--partition N]
 * [--isolation-level read_uncommitted|read_committed] [--timeout-ms MS] [--config k=v]
 */
public final class RefConsumer {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String isolation = "read_uncommitted";
        long timeoutMs = 60_000;
        List<String> topics = new ArrayList<>();
        List<Integer> only = new ArrayList<>();
        Properties props = new Properties();
        for (int k = 0; k < args.length; k++) {
            switch (args[k]) {
                case "--bootstrap-server": bootstrap = args[++k]; break;
                case "--topic": topics.add(args[++k]); break;
                case "--partition": only.add(Integer.parseInt(args[++k])); break;
                case "--isolation-level": isolation = args[++k]; break;
                case "--timeout-ms": timeoutMs = Long.parseLong(args[++k]); break;
                case "--config": {
                    String[] kv = args[++k].split("=", 2);
                    props.put(kv[0], kv[1]);
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[k]);
            }
        }
        if (bootstrap == null || topics.isEmpty()) {
            System.err.println("usage: RefConsumer --bootstrap-server HOST:PORT --topic T [...]");
            System.exit(2);
        }
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        final Duration wait = Duration.ofMillis(timeoutMs);
        long deadline = System.currentTimeMillis() + timeoutMs;
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String topic : topics) {
                List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs));
                if (infos == null || infos.isEmpty()) throw new IllegalStateException("no topic " + topic);
                for (PartitionInfo p : infos) {
                    if (only.isEmpty() || only.contains(p.partition())) tps.add(new TopicPartition(topic, p.partition()));
                }
            }
            tps.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofMillis(timeoutMs));
            Map<TopicPartition, List<String>> lines = new HashMap<>();
            for (TopicPartition tp : tps) lines.put(tp, new ArrayList<>());
            List<TopicPartition> open = new ArrayList<>(tps);
            while (true) {
                open.removeIf(tp -> consumer.position(tp, wait) >= ends.get(tp));
                if (open.isEmpty()) break;
                if (System.currentTimeMillis() > deadline) {
                    TopicPartition tp = open.get(0);
                    throw new IllegalStateException("timed out reading " + tp + " at "
                            + consumer.position(tp) + " of " + ends.get(tp));
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (r.offset() < ends.get(tp)) lines.get(tp).add(line(r));
                }
            }
            // Partition, then offset order (a partition's records come in offset order).
            for (TopicPartition tp : tps) {
                for (String l : lines.get(tp)) {
                    out.write(l);
                    out.write('\n');
                }
            }
        }
        out.flush();
    }

    static String line(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder b = new StringBuilder(128);
        b.append("{\"topic\":");
        Json.quote(b, r.topic());
        b.append(",\"partition\":").append(r.partition());
        b.append(",\"offset\":").append(r.offset());
        b.append(",\"timestamp\":").append(r.timestamp());
        b.append(",\"timestampType\":");
        Json.quote(b, r.timestampType().name);
        b.append(",\"key\":");
        Json.bytes(b, r.key());
        b.append(",\"value\":");
        Json.bytes(b, r.value());
        b.append(",\"headers\":[");
        boolean first = true;
        for (Header h : r.headers()) {
            if (!first) b.append(',');
            first = false;
            b.append('[');
            Json.quote(b, h.key());
            b.append(',');
            Json.bytes(b, h.value());
            b.append(']');
        }
        b.append("],\"leaderEpoch\":");
        b.append(r.leaderEpoch().map(String::valueOf).orElse("null"));
        b.append('}');
        return b.toString();
    }
}
