"""Notification channels through Apprise: their URLs (``urls``), the words people read
(``messages``), the outbox's sender (``sender``), the guard on where it connects
(``connectguard``), and the test button's own sender (``testsends``) with its limits
(``testgate``)."""
