"""The pure replication core: Kafka's replication rules as events in, decisions out.

No sockets, threads, clocks or files (docs/architecture.md, "Pure cores, thin shells"; the etcd-raft habit):
the broker's asyncio code feeds these with requests and `now_ms`, persists and sends what
they return, and tests drive them through whole failure transcripts deterministically.

| module | rule | source |
|---|---|---|
| `fetch_validation` | request leader epoch: older -> FENCED_LEADER_EPOCH, newer -> UNKNOWN_LEADER_EPOCH, -1 unchecked; then NOT_LEADER_OR_FOLLOWER | KIP-320, `Partition.localLogWithEpochOrThrow` |
| `epoch_history` | the (epoch, start offset) history of a log and "where does epoch E end" | KIP-101, KIP-279, `LeaderEpochFileCache` |
| `divergence` | leader answers a diverging fetch with (epoch, end offset); follower truncates to min(leader end, own end) for that epoch, iterating when it lacks the epoch; never to the HW | KIP-595 diverging epoch, KIP-279, `AbstractFetcherThread` |
| `follower` | one leader answer and the follower's log in, one decision out: append and HW, truncate, start over at the leader's log start, back off; stale answers dropped | `AbstractFetcherThread` (`fetchOffsetAndTruncate`, `processFetchRequest`) |
| `partition_state` | HW over the (maximal) ISR, ISR expand/shrink proposals, min.insync, delayed acks=all produces | KIP-497, KIP-903, `Partition.scala`, `DelayedProduce` |
| `producer_state` | idempotent producer dedup: last five batches per producer, sequence/epoch checks, snapshot and rebuild | KIP-98, `ProducerStateManager` |
| `transaction_index` | per partition: each producer's open transaction (first offset), the LSO = min(HW, earliest open or unreplicated transaction), bounded below by the log start, the aborted-transaction index; truncation and rebuild | KIP-98, `ProducerStateManager`, `TransactionIndex` |
| `errors` | the subset of `kraftlog.v1.ErrorCode` these modules answer with | proto/common.proto |
"""
