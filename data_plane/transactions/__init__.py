"""Transactions (KIP-98, hardened as in KIP-890): the pure pieces the transaction coordinator
will be built on. `state_machine` holds a transactional id's states and the coordinator's
decisions; docs/transactions.md says what exists now and what the coordinator will add."""
