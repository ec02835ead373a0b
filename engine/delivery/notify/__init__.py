"""Notification channels through Apprise: their URLs (``urls``), the words people read
(``messages``), the outbox's sender (``sender``) and the guard on where it connects
(``connectguard``)."""
