package kafkalog.it;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own producer as the reference writer. Reads JSON lines on stdin:
 *
 * <pre>
 * {"topic": T, "partition": N|null, "timestamp": MS|null, "key": B64|null, "value": B64|null,
 *  "headers": [[K, B64|null], ...]}       a record (topic defaults to --topic)
 * {"op": "begin"} {"op": "commit"} {"op": "abort"}   transactions (needs a transactional id)
 * {"op": "flush"}                          send what is buffered and wait for the acks
 * {"op": "halt"}                           flush, print the acks and end the JVM at once, without
 *                                          closing the producer: an open transaction stays open
 * {"op": "producer", "configs": {k: v}, "transactionalId": ID|null}
 *                                          close the producer and go on with a new one, made
 *                                          with the command line's configs and these
 * </pre>
 *
 * and prints, per record sent, {"topic", "partition", "offset", "timestamp", "aborted"} once
 * acknowledged. Producer configs come from --config k=v (compression.type, linger.ms,
 * batch.size, enable.idempotence, acks, ...).
 *
 * <p>Usage: RefProducer --bootstrap-server HOST:PORT [--topic T] [--transactional-id ID]
 * [--config k=v ...]
 */
public final class RefProducer {
    private final Properties base = new Properties();
    private final List<Future<RecordMetadata>> pending = new ArrayList<>();
    private final StringBuilder acks = new StringBuilder();
    private KafkaProducer<byte[], byte[]> producer;

    public static void main(String[] args) throws Exception {
        RefProducer p = new RefProducer();
        String bootstrap = null;
        String defaultTopic = null;
        for (int k = 0; k < args.length; k++) {
            switch (args[k]) {
                case "--bootstrap-server": bootstrap = args[++k]; break;
                case "--topic": defaultTopic = args[++k]; break;
                case "--transactional-id": p.base.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[++k]); break;
                case "--config": {
                    String[] kv = args[++k].split("=", 2);
                    p.base.put(kv[0], kv[1]);
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + args[k]);
            }
        }
        if (bootstrap == null) {
            System.err.println("usage: RefProducer --bootstrap-server HOST:PORT [--topic T] [...]");
            System.exit(2);
        }
        p.base.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.base.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.base.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.run(defaultTopic);
        System.out.print(p.acks);
        System.out.flush();
    }

    private void open(Map<?, ?> configs, Object transactionalId) throws Exception {
        close();
        Properties props = new Properties();
        props.putAll(base);
        if (configs != null) {
            for (Map.Entry<?, ?> e : configs.entrySet()) props.put(e.getKey(), String.valueOf(e.getValue()));
        }
        if (transactionalId != null) props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        producer = new KafkaProducer<>(props);
        if (props.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG)) producer.initTransactions();
    }

    private void close() throws Exception {
        if (producer == null) return;
        producer.flush();
        drain(false);
        producer.close();
        producer = null;
    }

    private void run(String defaultTopic) throws Exception {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                @SuppressWarnings("unchecked")
                Map<String, Object> m = (Map<String, Object>) Json.parse(line);
                Object op = m.get("op");
                if ("producer".equals(op)) {
                    open((Map<?, ?>) m.get("configs"), m.get("transactionalId"));
                    continue;
                }
                if (producer == null) open(null, null);
                if (op != null) {
                    switch ((String) op) {
                        case "begin": producer.beginTransaction(); break;
                        case "commit":
                            producer.commitTransaction();
                            drain(false);
                            break;
                        case "abort":
                            producer.flush();
                            producer.abortTransaction();
                            drain(true);
                            break;
                        case "flush":
                            producer.flush();
                            drain(false);
                            break;
                        case "halt":
                            producer.flush();
                            drain(false);
                            System.out.print(acks);
                            System.out.flush();
                            Runtime.getRuntime().halt(0);
                            break;
                        default: throw new IllegalArgumentException("unknown op " + op);
                    }
                    continue;
                }
                String topic = m.containsKey("topic") ? (String) m.get("topic") : defaultTopic;
                Integer partition = m.get("partition") == null ? null : ((Long) m.get("partition")).intValue();
                Long timestamp = (Long) m.get("timestamp");
                RecordHeaders headers = new RecordHeaders();
                Object hs = m.get("headers");
                if (hs != null) {
                    for (Object h : (List<?>) hs) {
                        List<?> kv = (List<?>) h;
                        headers.add(new RecordHeader((String) kv.get(0), Json.unbase64(kv.get(1))));
                    }
                }
                pending.add(producer.send(new ProducerRecord<>(topic, partition, timestamp,
                        Json.unbase64(m.get("key")), Json.unbase64(m.get("value")), headers)));
            }
        }
        close();
    }

    private void drain(boolean aborted) throws Exception {
        for (Future<RecordMetadata> f : pending) {
            RecordMetadata md;
            try {
                md = f.get();
            } catch (Exception e) {
                if (!aborted) throw e;
                acks.append("{\"aborted\":true,\"error\":");
                Json.quote(acks, String.valueOf(e.getCause() != null ? e.getCause() : e));
                acks.append("}\n");
                continue;
            }
            acks.append("{\"topic\":");
            Json.quote(acks, md.topic());
            acks.append(",\"partition\":").append(md.partition());
            acks.append(",\"offset\":").append(md.hasOffset() ? md.offset() : -1);
            acks.append(",\"timestamp\":").append(md.timestamp());
            acks.append(",\"aborted\":").append(aborted).append("}\n");
        }
        pending.clear();
    }
}
