"""Monitors as code: the plan and file format, through the API and the command line."""
