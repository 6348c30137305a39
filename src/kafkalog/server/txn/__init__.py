"""The transaction coordinator (:mod:`.coordinator`): transactional ids, producer ids, their
state in ``__transaction_state``, loading and describing them."""
