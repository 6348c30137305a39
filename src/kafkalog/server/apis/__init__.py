"""The broker's own APIs, one module per family; each ``handlers(broker)`` gives its handlers by
API key (metadata's also takes the route table, for ApiVersions). Nothing here imports the
broker at run time, nor the app that puts the handlers in its route table."""
