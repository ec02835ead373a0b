"""Several nodes: identity, ownership of checks, signed peer requests, outages confirmed
from another region."""
