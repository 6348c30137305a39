package kafkalog.it;

import java.util.Base64;
import org.apache.kafka.tools.api.Decoder;

/**
 * A decoder for Kafka's DumpLogSegments ({@code --key-decoder-class} and
 * {@code --value-decoder-class}): prints a key or value as standard, padded base64, so that
 * {@code key:} and {@code payload:} show the exact bytes (the default decoder prints them as
 * UTF-8 text, which loses binary bytes). DumpLogSegments prints nothing for a null key or value;
 * an empty one prints as an empty string.
 */
public final class Base64Decoder implements Decoder<String> {
    @Override
    public String fromBytes(byte[] bytes) {
        return Base64.getEncoder().encodeToString(bytes);
    }
}
