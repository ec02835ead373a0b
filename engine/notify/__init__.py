"""Notification channels through Apprise: URLs (:mod:`engine.notify.urls`), the words people
read (:mod:`engine.notify.messages`) and the outbox's sender (:mod:`engine.notify.sender`)."""
