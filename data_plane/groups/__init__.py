"""Consumer groups: the coordinator (KIP-848) hosted on every broker. Pure cores
(`state`, `assignors`, `membership`, `offsets`, `changes`, `placement`) and the shell that
runs them over the `__consumer_offsets` partitions this broker leads (`coordinator`,
`offsets_topic`, `service`, `wiring`). See docs/groups.md."""
