"""The authenticated API's handlers, one module per resource (monitors, certificates,
maintenance, monitor sets, nodes, notifications, timings, webhooks), their JSON views
(``views``) and the OpenAPI document (``openapi``, with the monitor and check shapes in
``monitor_openapi``, the heartbeats' in ``heartbeat_openapi`` and the shared blocks in
``openapi_blocks``)."""
