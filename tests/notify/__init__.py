"""Notification channels (Apprise): the API, the command line, delivery, the queue, outages."""
