"""The bus and its topology. Imports `base` only.

- core.py: `Bus`, a service's binding to NATS and JetStream: publishing with dedupe keys, and
  the wrapper every durable handler runs in (acks, heartbeats, poison, dead letters).
- consumer.py: a durable consumer read with a standing pull.
- progress.py: a request's progress as producers publish it (and on its push subject when a
  client is notified of the request).
- kvstore.py: KV compare-and-set and key encoding.
- topology.py: the streams, buckets and consumers, what each role may use of them, and the
  bootstrap step that creates them.
- natsauth.py: the locked-down nats-server configuration: one user per role, enforcing the
  topology.
- natscluster.py: one node's part of a nats-server cluster configuration.
- natslogin.py: how a process reaches NATS: a list of servers, a login apart from the URL, TLS.
- natswatch.py: a NATS connection that outlives any outage and says so in a few lines.
- natsserver.py: the embedded `nats-server` for `sidekick up` and the tests.
- poison.py: poison messages said in the log without their content.
- sealing.py: dedupe keys no other role can guess, sealed with the role's own login secret.
- busmetrics.py: the broker's Prometheus middleware, with bounded label values.
"""
