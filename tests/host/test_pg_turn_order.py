"""Issue 28 on PostgreSQL: one conversation's inputs are processed in the order they were
received, however many workers run (the burst is in `order_burst.py`)."""

from __future__ import annotations

import pytest

from .order_burst import burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_twenty_messages_per_conversation_at_eight_workers_are_processed_in_order():
    burst(conversations=10, messages=20, workers=8)


def test_webhooks_and_api_calls_mixed_at_eight_workers_keep_the_order():
    """Every fourth message through the API (in-line, answered with its turn) while the workers
    run the webhooks' inputs: neither overtakes the other."""
    burst(conversations=10, messages=20, workers=8, seed=29, in_line_every=4)
