"""The Redis clients a connection string names: one server, a Cluster, or via Sentinel.

- ``redis://`` / ``rediss://`` / ``unix://``: one server (redis-py's ``from_url``).
- ``redis+cluster://[user:password@]host:port[,host:port...][?retries=N]``: redis-py's
  ``RedisCluster`` (sync and asyncio); the listed nodes are only where discovery starts.
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db][?retries=N]``:
  the master the sentinels name for ``service``, found again after a failover.

Query options: ``retries`` (batches sent again after a failover error), ``socket_timeout``
and ``socket_connect_timeout`` (seconds). On one server, ``max_connections`` (default 100)
bounds the client's pool and ``pool_timeout`` (seconds, default 20) is how long a call waits
for a free connection before StoreUnavailable: redis-py's own pool raises at once when
exhausted, so 128 concurrent graph runs (two connections each at times) failed.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.backoff
import redis.cluster
import redis.retry
import redis.sentinel

from checkpoints.errors import CheckpointConfigError

# A cluster or sentinel batch that meets a failover is sent again this many times (``?retries=N`` in
# the URL), RETRY_PAUSE seconds apart and doubling (12.6 s in all), before the caller gets
# StoreUnavailable: a promotion takes about twice cluster-node-timeout
# (or sentinel's down-after-milliseconds and an election). Every batch is safe
# to run twice.
CLUSTER_RETRIES = 6
RETRY_PAUSE = 0.2
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str | None) -> bool:
    return bool(url) and url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def _nodes_and_options(url: str, what: str) -> tuple[list[tuple[str, int]], dict, str]:
    """``scheme://[user:password@]host:port[,host:port...][/path]`` -> nodes, options, path."""
    parts = urlsplit(url)
    netloc = parts.netloc
    options: dict = {"socket_connect_timeout": 5, "socket_timeout": 5}
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, password = auth.partition(":")
        if user:
            options["username"] = unquote(user)
        if password:
            options["password"] = unquote(password)
    nodes = []
    for node in netloc.split(","):
        host, _, port = node.strip().rpartition(":")
        if not host or not port.isdigit():
            raise CheckpointConfigError(
                f"{what} URL {url!r}: node {node!r} is not host:port",
                field="conn_string",
            )
        nodes.append((host.strip("[]"), int(port)))
    if parts.scheme.lower().startswith("rediss"):
        options["ssl"] = True
    for name, values in parse_qs(parts.query).items():
        if name in ("socket_timeout", "socket_connect_timeout"):
            options[name] = float(values[-1])
    return nodes, options, parts.path


def _cluster_options(url: str) -> tuple[list[tuple[str, int]], dict]:
    """``redis+cluster://[user:password@]host:port[,host:port...][/0]`` -> nodes, options."""
    nodes, options, path = _nodes_and_options(url, "Redis Cluster")
    if path.strip("/") not in ("", "0"):
        raise CheckpointConfigError(
            f"Redis Cluster URL {url!r} names database {path.strip('/')!r}; a cluster "
            "has only database 0",
            field="conn_string",
        )
    return nodes, options


def failover_retries(url: str) -> int:
    """``?retries=N`` of a cluster or sentinel URL: how often a batch meeting a failover is
    sent again."""
    values = parse_qs(urlsplit(url).query).get("retries")
    if not values:
        return CLUSTER_RETRIES
    if not values[-1].isdigit():
        raise CheckpointConfigError(
            f"Redis URL {url!r}: retries={values[-1]!r} is not a whole number",
            field="conn_string",
        )
    return int(values[-1])


def cluster_address(url: str) -> str:
    return "cluster " + ",".join(f"{h}:{p}" for h, p in _cluster_options(url)[0])


# The cluster client's own retry loop is off: the saver's (``?retries=N``, RedisDriver) is the
# one that decides how long a failover is ridden out. redis-py 8 made the client retry 10
# times with backoff by default, which rode out a whole failover even at ``?retries=0``; a
# redirection (MOVED, ASK) is followed either way, it is not a retry.
def cluster_client(url: str) -> redis.cluster.RedisCluster:
    nodes, options = _cluster_options(url)
    return redis.cluster.RedisCluster(
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in nodes],
        retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
        **options,
    )


def async_cluster_client(url: str) -> redis.asyncio.cluster.RedisCluster:
    nodes, options = _cluster_options(url)
    return redis.asyncio.cluster.RedisCluster(
        startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in nodes],
        retry=redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 0),
        **options,
    )


SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")


def is_sentinel_url(url: str | None) -> bool:
    return bool(url) and url.split("://", 1)[0].lower() in SENTINEL_SCHEMES


def _sentinel_options(url: str) -> tuple[list[tuple[str, int]], str, int, dict]:
    """``redis+sentinel://[password@]host:port[,...]/service[/db]`` -> parts of a client."""
    nodes, options, path = _nodes_and_options(url, "Redis Sentinel")
    service, _, db = path.strip("/").partition("/")
    if not service:
        raise CheckpointConfigError(
            f"Redis Sentinel URL {url!r} names no service: "
            "redis+sentinel://host:26379[,host:port...]/service_name[/db]",
            field="conn_string",
        )
    if db and not db.isdigit():
        raise CheckpointConfigError(
            f"Redis Sentinel URL {url!r}: database {db!r} is not a number", field="conn_string"
        )
    return nodes, unquote(service), int(db or 0), options


def sentinel_address(url: str) -> str:
    nodes, service, db, _ = _sentinel_options(url)
    return f"sentinel {','.join(f'{h}:{p}' for h, p in nodes)} service {service!r} db {db}"


def sentinel_client(url: str) -> redis.Redis:
    nodes, service, db, options = _sentinel_options(url)
    sentinels = redis.sentinel.Sentinel(nodes, **_sentinel_kwargs(options))
    return sentinels.master_for(service, db=db, **options)


def async_sentinel_client(url: str) -> redis.asyncio.Redis:
    nodes, service, db, options = _sentinel_options(url)
    sentinels = redis.asyncio.sentinel.Sentinel(nodes, **_sentinel_kwargs(options))
    return sentinels.master_for(service, db=db, **options)


def _sentinel_kwargs(options: dict) -> dict:
    # The sentinels themselves take the timeouts; the password is the data nodes'.
    return {
        "socket_timeout": options["socket_timeout"],
        "socket_connect_timeout": options["socket_connect_timeout"],
    }


# One server's pool: callers beyond it queue for a connection this long, then fail.
MAX_CONNECTIONS = 100
POOL_TIMEOUT = 20.0


def _pool_options(url: str) -> tuple[str, dict]:
    """``url`` without ``pool_timeout``, and the blocking pool's options."""
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    raw = query.pop("pool_timeout", [str(POOL_TIMEOUT)])[-1]
    try:
        timeout = float(raw)
    except ValueError:
        timeout = -1.0
    if not timeout > 0:
        raise CheckpointConfigError(
            f"pool_timeout in the Redis URL must be seconds above zero, got {raw!r}",
            field="conn_string",
        )
    options = {"socket_connect_timeout": 5, "timeout": timeout}
    if "max_connections" not in query:
        options["max_connections"] = MAX_CONNECTIONS
    rest = "&".join(f"{k}={v}" for k, values in query.items() for v in values)
    return parts._replace(query=rest).geturl(), options


def single_client(url: str) -> redis.Redis:
    """A client for one server whose callers wait for a free connection (see the module)."""
    url, options = _pool_options(url)
    return redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(url, **options))


def async_client(url: str):
    """A new asyncio client for ``url`` (redis.asyncio connections belong to one loop)."""
    if is_cluster_url(url):
        return async_cluster_client(url)
    if is_sentinel_url(url):
        return async_sentinel_client(url)
    url, options = _pool_options(url)
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, **options)
    return redis.asyncio.Redis(connection_pool=pool)
