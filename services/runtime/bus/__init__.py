"""The bus and its topology: a service's binding to NATS and JetStream (core.py: `Bus`), the
durable consumer (consumer.py), KV compare-and-set (kvstore.py), the streams, buckets and
consumers each role may use (topology.py), the users that enforce it (natsauth.py), the
embedded server (natsserver.py) and bus metrics (busmetrics.py). Imports `base` only."""
