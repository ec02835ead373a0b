"""The outbox's sending side: one runner loop (:mod:`engine.outbox.runner`) with a sender per
kind of message (webhooks in :mod:`engine.webhooks.deliverer`, notifications in
:mod:`engine.notify.sender`)."""
