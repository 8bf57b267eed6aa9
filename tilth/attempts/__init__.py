"""Best of N and the durable queue (SPEC §11): a task tried N times from its start, the
winner chosen by checks (``figures``) and grafted into its parent (``graft``); attempts
and queued sessions run as DBOS workflows (``engine``, imported only when used)."""
