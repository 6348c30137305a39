"""What a listener asks of a client before serving it: TLS (``SSL``, ``SASL_SSL``) and SASL
authentication (``SASL_PLAINTEXT``, ``SASL_SSL``) with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

- :mod:`.listeners`: Kafka's listener syntax (``NAME://HOST:PORT``) and security protocols;
- :mod:`.tls`: the server's :class:`ssl.SSLContext` (``ssl.client.auth`` none/requested/required);
- :mod:`.scram`: SCRAM credentials as Kafka stores them (salt, iterations, stored key, server key)
  and the server side of RFC 5802/7677;
- :mod:`.sasl`: the users, PLAIN (RFC 4616), and one connection's authentication as Kafka's
  SaslServerAuthenticator runs it (KIP-43 handshake, KIP-152 SaslAuthenticate).

Sans I/O apart from reading the certificate files: :mod:`kafkalog.server.connection` feeds the
authenticator the frames and sends what it answers. No authorization (ACLs): an authenticated
principal may do anything, as with Kafka's default ``allow.everyone.if.no.acl.found`` off and no
authorizer configured.
"""
