"""Webhook delivery: the API, the queue, policy and signing, over real HTTP."""
