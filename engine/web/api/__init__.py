"""The authenticated API's handlers, one module per resource (monitors, certificates,
maintenance, monitor sets, nodes, notifications, timings, webhooks), their JSON views
(``views``) and the OpenAPI document (``openapi``)."""
