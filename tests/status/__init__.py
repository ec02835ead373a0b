"""Status pages and badges: the store, the view, HTTP, and a real browser."""
